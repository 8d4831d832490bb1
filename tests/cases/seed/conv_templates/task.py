import torch
import torch.nn as nn


class Model(nn.Module):
    """A plain 2-D convolution with bias (KernelBench level 1's standard Conv2d at a small size): Inductor's
    default code is one library call, so the seed is its code with its Triton templates forced (conv2d)."""

    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        return self.conv(x)


batch_size = 2
in_channels = 3
out_channels = 8
height, width = 12, 12
kernel_size = 3


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
