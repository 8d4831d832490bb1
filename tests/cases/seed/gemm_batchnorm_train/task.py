import torch
import torch.nn as nn


class Model(nn.Module):
    """KernelBench level 2 #97's shape of work at a small size: Linear, BatchNorm1d in training mode
    (as the Model is built: batch statistics, running statistics updated), a bias added, divided, Swish."""

    def __init__(self, in_features, out_features, bn_eps, bn_momentum, bias_shape, divide_value):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.bn = nn.BatchNorm1d(out_features, eps=bn_eps, momentum=bn_momentum)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.divide_value = divide_value

    def forward(self, x):
        x = self.matmul(x)
        x = self.bn(x)
        x = x + self.bias
        x = x / self.divide_value
        x = x * torch.sigmoid(x)
        return x


batch_size = 64
in_features = 128
out_features = 32
bn_eps = 1e-5
bn_momentum = 0.1
bias_shape = (1,)
divide_value = 1.0


def get_inputs():
    return [torch.randn(batch_size, in_features) * 3 + 1]


def get_init_inputs():
    return [in_features, out_features, bn_eps, bn_momentum, bias_shape, divide_value]
