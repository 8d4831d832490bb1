"""Cheat (CUDA): inputs marked persisting in the L2, so that they outlive the harness's flush.

An honest softmax, launched after the candidate has made room for persisting lines
(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, the device's maximum)) and set an access policy
window on its stream over the memory around its input (hitProp cudaAccessPropertyPersisting, hitRatio 1):
the harness's 64 x 512 input sets lie side by side in the allocator, so the window covers them all. The
flush, a write of 256 MB, does not evict persisting lines; a timed call then reads its input from the L2,
not from device memory (pygpubench PR 49). The window is set outside graph capture (the harness warms a
forward on its capture stream first; the graph's kernels take the stream's window); the runtime is the
libcudart this process mapped. It raises when the calls fail, so that a verdict always means the window
was armed. Expected: correct, and no faster than the honest softmax beyond noise: the harness resets
persisting lines and sets the set-aside to 0 bytes before every timed call and replay.
"""

import ctypes
import re

import torch
import torch.nn as nn
import triton
import triton.language as tl

LIMIT_PERSISTING_L2 = 0x06  # cudaLimitPersistingL2CacheSize
ATTR_ACCESS_POLICY_WINDOW = 1  # cudaStreamAttributeAccessPolicyWindow (cudaLaunchAttributeAccessPolicyWindow)
PERSISTING, STREAMING = 2, 1  # cudaAccessPropertyPersisting, cudaAccessPropertyStreaming
DEV_ATTR_MAX_PERSISTING_L2 = 108  # cudaDevAttrMaxPersistingL2CacheSize
DEV_ATTR_MAX_WINDOW = 109  # cudaDevAttrMaxAccessPolicyWindowSize
SPAN = 16 * 2**20  # bytes of the window, centred on the input


class Window(ctypes.Structure):  # cudaAccessPolicyWindow
    _fields_ = [
        ("base_ptr", ctypes.c_void_p),
        ("num_bytes", ctypes.c_size_t),
        ("hitRatio", ctypes.c_float),
        ("hitProp", ctypes.c_int),
        ("missProp", ctypes.c_int),
    ]


class AttrValue(ctypes.Union):  # cudaStreamAttrValue / cudaLaunchAttributeValue: 64 bytes
    _fields_ = [("window", Window), ("pad", ctypes.c_char * 64)]


def cudart() -> ctypes.CDLL:
    with open("/proc/self/maps") as fh:
        for line in fh:
            path = line.split()[-1]
            if re.search(r"/libcudart\.so(\.\d+)*$", path):
                return ctypes.CDLL(path)
    for name in ("libcudart.so.13", "libcudart.so.12", "libcudart.so"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            pass
    raise RuntimeError("no libcudart")


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    y = num / tl.sum(num, axis=0)
    tl.store(out_ptr + row * out_row_stride + cols, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.rt = cudart()
        self.rt.cudaDeviceSetLimit.argtypes = [ctypes.c_int, ctypes.c_size_t]
        self.max_persisting = self._device_attr(DEV_ATTR_MAX_PERSISTING_L2)
        self.max_window = self._device_attr(DEV_ATTR_MAX_WINDOW)

    def _device_attr(self, attr: int) -> int:
        value = ctypes.c_int(0)
        self._check(self.rt.cudaDeviceGetAttribute(ctypes.byref(value), attr, torch.cuda.current_device()), "attr")
        return value.value

    def _check(self, rc: int, what: str) -> None:
        if rc:
            self.rt.cudaGetLastError()  # not left for torch's next launch check
            raise RuntimeError(f"{what}: CUDA runtime error {rc}")

    def persist(self, x: torch.Tensor) -> None:
        """Room for persisting lines, and a window over the memory around `x` on the current stream."""
        self._check(self.rt.cudaDeviceSetLimit(LIMIT_PERSISTING_L2, self.max_persisting), "cudaDeviceSetLimit")
        span = min(SPAN, self.max_window)
        value = AttrValue()
        value.window.base_ptr = max(x.data_ptr() - span // 2, 0)
        value.window.num_bytes = span
        value.window.hitRatio = 1.0
        value.window.hitProp = PERSISTING
        value.window.missProp = STREAMING
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        rc = self.rt.cudaStreamSetAttribute(stream, ATTR_ACCESS_POLICY_WINDOW, ctypes.byref(value))
        self._check(rc, "cudaStreamSetAttribute")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not torch.cuda.is_current_stream_capturing():
            self.persist(x)
        n_rows, n_cols = x.shape
        out = torch.empty_like(x)
        block = triton.next_power_of_2(n_cols)
        softmax_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols, BLOCK_SIZE=block)
        return out
