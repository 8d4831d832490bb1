"""A CUDA C++ (load_inline) candidate for KernelBench level1 36_RMSNorm_: RMS over dim 1 of an
(N, C, *) tensor. Each thread owns one (n, position) column: it reads the C features (coalesced
across the threads of a warp, positions being contiguous), then writes them scaled."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void rmsnorm_dim1_kernel(const float* __restrict__ x, float* __restrict__ y,
                                    int64_t batch, int64_t channels, int64_t inner, float eps) {
    int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= batch * inner) return;
    int64_t n = idx / inner, p = idx % inner;
    const float* col = x + n * channels * inner + p;
    float* out = y + n * channels * inner + p;
    float acc = 0.0f;
    for (int64_t c = 0; c < channels; ++c) {
        float v = col[c * inner];
        acc += v * v;
    }
    float inv = rsqrtf(acc / (float)channels + eps);
    for (int64_t c = 0; c < channels; ++c) {
        out[c * inner] = col[c * inner] * inv;
    }
}

torch::Tensor rmsnorm_cuda(torch::Tensor x, double eps) {
    TORCH_CHECK(x.is_cuda() && x.dim() >= 2 && x.scalar_type() == torch::kFloat32, "rmsnorm_cuda: float32 CUDA, 2-D+");
    auto input = x.contiguous();
    auto out = torch::empty_like(input);
    int64_t batch = input.size(0), channels = input.size(1);
    int64_t inner = input.numel() / (batch * channels);
    const int threads = 256;
    int64_t blocks = (batch * inner + threads - 1) / threads;
    rmsnorm_dim1_kernel<<<blocks, threads>>>(input.data_ptr<float>(), out.data_ptr<float>(), batch, channels, inner,
                                              (float)eps);
    return out;
}
"""

cpp_source = "torch::Tensor rmsnorm_cuda(torch::Tensor x, double eps);"

rmsnorm_ext = load_inline(
    name="kb_rmsnorm_dim1", cpp_sources=cpp_source, cuda_sources=cuda_source, functions=["rmsnorm_cuda"]
)


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rmsnorm_ext.rmsnorm_cuda(x, self.eps)
