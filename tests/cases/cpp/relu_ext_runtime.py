"""The same ReLU, but its source is only known when the candidate runs (a computed constant), so
the pool cannot build it ahead: the sandbox builds it itself, in its own time window."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

ZERO = 0.0 * 3
cpp_source = f"""
torch::Tensor relu_loop(torch::Tensor x) {{
    auto input = x.contiguous();
    auto out = torch::empty_like(input);
    const float* a = input.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < input.numel(); ++i) o[i] = a[i] > {ZERO}f ? a[i] : {ZERO}f;
    return out;
}}
"""

relu_ext = load_inline(name="ks_test_relu_runtime", cpp_sources=cpp_source, functions=["relu_loop"])


class ModelNew(nn.Module):
    def forward(self, x):
        return relu_ext.relu_loop(x)
