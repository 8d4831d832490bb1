"""A C++ extension that does not compile. Without torch's implicit header the compiler fails in
well under a second, which keeps the CI test of the error path cheap."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = """
int relu_loop(int x) {
    return x > 0 ? x : undeclared_zero;
}
"""

broken = load_inline(
    name="ks_test_broken_ext", cpp_sources=cpp_source, functions=["relu_loop"], no_implicit_headers=True
)


class ModelNew(nn.Module):
    def forward(self, x):
        return broken.relu_loop(x)
