"""A small ReLU task for C++ extension candidates on the CPU (the build pool's CI tests)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(64, 256)]


def get_init_inputs():
    return []
