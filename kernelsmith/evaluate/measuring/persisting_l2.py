"""Persisting L2 lines, reset before every timed call: a candidate's inputs must not outlive the flush.

Since Ampere, a stream (and each kernel node a graph captures from it) can carry an access policy window
whose hits persist in a set-aside part of the L2 (cudaStreamSetAttribute with a cudaAccessPolicyWindow,
hitProp cudaAccessPropertyPersisting, once cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, n) made
room). The harness's flush, a 256 MB write, does not evict persisting lines, so a candidate that marks
its inputs persisting finds them in the L2 in a call that is timed cold (pygpubench PR 49). Before each
timed call, replay and batch the harness demotes every persisting line to normal
(cudaCtxResetPersistingL2Cache) and sets the set-aside to 0 bytes, which also leaves a window captured
in a graph nothing to persist into; no candidate code runs between that and the replay.

The calls go through the CUDA runtime this process already has: torch loads libcudart (the pip wheels'
nvidia/cu13/lib or nvidia/cuda_runtime/lib, or a system one) and this process's own maps say which file
it is; a system libcudart is the fallback. Found and bound at import, before any candidate code runs in
the sandbox. Where none loads, `reset` says so and the timing carries that note.
"""

from __future__ import annotations

import ctypes
import os
import re
import sys
from pathlib import Path

CUDA_LIMIT_PERSISTING_L2_CACHE_SIZE = 0x06  # cudaLimitPersistingL2CacheSize (driver_types.h, CUDA 11-13)
CUDA_ERROR_UNSUPPORTED_LIMIT = 215  # a GPU without a persisting L2 (before Ampere): nothing to reset
_CUDART = re.compile(r"/libcudart\.so(\.\d+)*$")


def loaded_cudart(maps: Path = Path("/proc/self/maps")) -> list[str]:
    """The libcudart files mapped into this process (torch's own), newest soname first."""
    try:
        lines = maps.read_text().splitlines()
    except OSError:
        return []
    paths = {ln.split(None, 5)[-1] for ln in lines if len(ln.split(None, 5)) == 6}
    return sorted((p for p in paths if _CUDART.search(p)), reverse=True)


def wheel_cudart() -> list[str]:
    """libcudart as NVIDIA's pip wheels lay it out beside torch (CUDA 13: nvidia/cu13/lib; 12:
    nvidia/cuda_runtime/lib), in the directories Python imports from."""
    found = []
    for entry in sys.path:
        for sub in ("nvidia/cu13/lib", "nvidia/cuda_runtime/lib"):
            found += sorted(str(p) for p in (Path(entry or ".") / sub).glob("libcudart.so*"))
    return found


def candidates() -> list[str]:
    """Where to load libcudart from, in order: the file torch loaded, the wheels', the system's (by
    soname, through the dynamic loader's own search)."""
    system = ["libcudart.so.13", "libcudart.so.12", "libcudart.so"]
    return list(dict.fromkeys([*loaded_cudart(), *wheel_cudart(), *system]))


class Runtime:
    """The three runtime calls the reset needs, bound once."""

    def __init__(self, names: list[str] | None = None):
        self.path: str | None = None
        self.why: str | None = None
        self.lib = None
        tried = candidates() if names is None else names
        for name in tried:
            try:
                lib = ctypes.CDLL(name)
                self._reset, self._set_limit = lib.cudaCtxResetPersistingL2Cache, lib.cudaDeviceSetLimit
                self._get_limit, self._last_error = lib.cudaDeviceGetLimit, lib.cudaGetLastError
            except (OSError, AttributeError):
                continue
            self._set_limit.argtypes = [ctypes.c_int, ctypes.c_size_t]
            self._get_limit.argtypes = [ctypes.POINTER(ctypes.c_size_t), ctypes.c_int]
            self.lib, self.path = lib, os.fspath(name)
            return
        self.why = "no CUDA runtime (libcudart) could be loaded" + (f" (tried {', '.join(tried)})" if tried else "")

    def reset(self) -> str | None:
        """Persisting lines demoted, the set-aside at 0 bytes; None when done, else why not."""
        if self.lib is None:
            return f"persisting L2 lines not reset before timing: {self.why}"
        done = int(self._reset())
        capped = int(self._set_limit(CUDA_LIMIT_PERSISTING_L2_CACHE_SIZE, 0))
        if done or capped:
            self._last_error()  # clear it: torch's next launch check would raise it as its own
        if capped == CUDA_ERROR_UNSUPPORTED_LIMIT and not done:
            return None  # no persisting L2 on this GPU
        if done or capped:
            return (
                "persisting L2 lines not reset before timing: cudaCtxResetPersistingL2Cache returned "
                f"{done}, cudaDeviceSetLimit {capped}"
            )
        return None

    def limit(self) -> int | None:
        """The persisting set-aside in force now, in bytes (None where it cannot be read)."""
        if self.lib is None:
            return None
        value = ctypes.c_size_t(0)
        if int(self._get_limit(ctypes.byref(value), CUDA_LIMIT_PERSISTING_L2_CACHE_SIZE)):
            self._last_error()
            return None
        return int(value.value)


RUNTIME = Runtime()
reset = RUNTIME.reset
