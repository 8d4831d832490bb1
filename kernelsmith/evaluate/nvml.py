"""The GPUs as the driver's NVML library sees them: milliseconds, where importing torch and
starting CUDA take seconds. Hand-written over ctypes: the GPU images lack the pynvml binding."""

from __future__ import annotations

import ctypes


def nvml_capabilities() -> list[tuple[int, int]] | None:
    """The compute capability of every GPU on the host (NVML's order, CUDA_VISIBLE_DEVICES not
    applied), or None where NVML cannot be loaded or started."""
    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
        if nvml.nvmlInit_v2() != 0:
            return None
    except (OSError, AttributeError):
        return None
    try:
        count = ctypes.c_uint(0)
        if nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
            return None
        caps = []
        for i in range(count.value):
            handle = ctypes.c_void_p()
            major, minor = ctypes.c_int(0), ctypes.c_int(0)
            if nvml.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(handle)) != 0 or (
                nvml.nvmlDeviceGetCudaComputeCapability(handle, ctypes.byref(major), ctypes.byref(minor)) != 0
            ):
                caps.append((0, 0))  # present, capability unknown: it still counts as a GPU
                continue
            caps.append((major.value, minor.value))
        return caps
    finally:
        nvml.nvmlShutdown()
