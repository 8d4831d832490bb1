"""A CUDA C++ (load_inline) candidate for KernelBench level1 19_ReLU: ReLU, four floats per
thread (float4 loads and stores), a grid-stride loop, the tail done one by one."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void relu_vec4_kernel(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4) {
    int64_t stride = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 v = x[i];
        v.x = fmaxf(v.x, 0.0f); v.y = fmaxf(v.y, 0.0f); v.z = fmaxf(v.z, 0.0f); v.w = fmaxf(v.w, 0.0f);
        y[i] = v;
    }
}

__global__ void relu_tail_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t start, int64_t n) {
    int64_t i = start + (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.0f);
}

torch::Tensor relu_cuda(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "relu_cuda: a float32 CUDA tensor");
    auto input = x.contiguous();
    auto out = torch::empty_like(input);
    int64_t n = input.numel();
    int64_t n4 = n / 4;
    const int threads = 256;
    if (n4 > 0) {
        int64_t blocks = std::min<int64_t>((n4 + threads - 1) / threads, 132 * 32);
        relu_vec4_kernel<<<blocks, threads>>>(
            reinterpret_cast<const float4*>(input.data_ptr<float>()), reinterpret_cast<float4*>(out.data_ptr<float>()), n4);
    }
    if (n4 * 4 < n) {
        relu_tail_kernel<<<1, threads>>>(input.data_ptr<float>(), out.data_ptr<float>(), n4 * 4, n);
    }
    return out;
}
"""

cpp_source = "torch::Tensor relu_cuda(torch::Tensor x);"

relu_ext = load_inline(
    name="kb_relu_vec4", cpp_sources=cpp_source, cuda_sources=cuda_source, functions=["relu_cuda"], verbose=False
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu_ext.relu_cuda(x)
