"""An honest C++ extension candidate (built with the host compiler): ReLU in a plain loop."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = """
torch::Tensor relu_loop(torch::Tensor x) {
    auto input = x.contiguous();
    auto out = torch::empty_like(input);
    const float* a = input.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t i = 0; i < input.numel(); ++i) o[i] = a[i] > 0.0f ? a[i] : 0.0f;
    return out;
}
"""

relu_ext = load_inline(name="ks_test_relu_ext", cpp_sources=cpp_source, functions=["relu_loop"], verbose=True)


class ModelNew(nn.Module):
    def forward(self, x):
        return relu_ext.relu_loop(x)
