"""A CUDA C++ (load_inline) candidate for KernelBench level1 23_Softmax: softmax over dim 1, one
block per row; an online pass finds each thread's max and rescaled sum, a block reduction combines
them, a second pass writes exp(x - max) / sum."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cfloat>

constexpr int THREADS = 1024;

__device__ __forceinline__ void combine(float& m, float& s, float m2, float s2) {
    float mx = fmaxf(m, m2);
    s = (m == -FLT_MAX ? 0.0f : s * __expf(m - mx)) + (m2 == -FLT_MAX ? 0.0f : s2 * __expf(m2 - mx));
    m = mx;
}

__global__ void softmax_rows_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t cols) {
    const float* row = x + (int64_t)blockIdx.x * cols;
    float* out = y + (int64_t)blockIdx.x * cols;
    float m = -FLT_MAX, s = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += THREADS) {
        float v = row[c];
        if (v > m) { s = s * __expf(m - v) + 1.0f; m = v; }
        else { s += __expf(v - m); }
    }
    for (int off = 16; off > 0; off >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffff, m, off);
        float s2 = __shfl_xor_sync(0xffffffff, s, off);
        combine(m, s, m2, s2);
    }
    __shared__ float ms[THREADS / 32], ss[THREADS / 32];
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) { ms[warp] = m; ss[warp] = s; }
    __syncthreads();
    if (warp == 0) {
        m = lane < THREADS / 32 ? ms[lane] : -FLT_MAX;
        s = lane < THREADS / 32 ? ss[lane] : 0.0f;
        for (int off = 16; off > 0; off >>= 1) {
            float m2 = __shfl_xor_sync(0xffffffff, m, off);
            float s2 = __shfl_xor_sync(0xffffffff, s, off);
            combine(m, s, m2, s2);
        }
        if (lane == 0) { ms[0] = m; ss[0] = s; }
    }
    __syncthreads();
    float row_max = ms[0], inv = 1.0f / ss[0];
    for (int64_t c = threadIdx.x; c < cols; c += THREADS) {
        out[c] = __expf(row[c] - row_max) * inv;
    }
}

torch::Tensor softmax_cuda(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 2 && x.scalar_type() == torch::kFloat32, "softmax_cuda: 2-D float32 CUDA");
    auto input = x.contiguous();
    auto out = torch::empty_like(input);
    softmax_rows_kernel<<<input.size(0), THREADS>>>(input.data_ptr<float>(), out.data_ptr<float>(), input.size(1));
    return out;
}
"""

cpp_source = "torch::Tensor softmax_cuda(torch::Tensor x);"

softmax_ext = load_inline(
    name="kb_softmax_rows", cpp_sources=cpp_source, cuda_sources=cuda_source, functions=["softmax_cuda"]
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softmax_ext.softmax_cuda(x)
