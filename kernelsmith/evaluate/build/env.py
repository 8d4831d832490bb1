"""The toolchain and GPU a build is for: part of every build's content key, and the environment
the build runs in. Computed once, in the pool's process, and handed to the builders and the
judges, so the key a build is published under is the key a sandbox looks up.

Read without importing torch (seconds) or starting CUDA: torch's version file, the compilers'
`--version` lines, the GPUs' compute capability from the driver's NVML library.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

from kernelsmith.evaluate.nvml import nvml_capabilities


def _torch_identity() -> str:
    """torch's version file (version, CUDA version, git commit), hashed; or its version string."""
    spec = importlib.util.find_spec("torch")
    if spec is not None and spec.origin:
        version_file = Path(spec.origin).parent / "version.py"
        try:
            return hashlib.sha256(version_file.read_bytes()).hexdigest()[:16]
        except OSError:
            pass
    import torch

    return f"{torch.__version__} cuda {torch.version.cuda}"


def _first_line(cmd: list[str], last: bool = False) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip().splitlines()
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return (out[-1] if last else out[0]) if out else ""


def nvcc_path() -> str | None:
    """Where torch's cpp_extension finds nvcc: $CUDA_HOME / $CUDA_PATH, PATH, /usr/local/cuda."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        home = os.environ.get(var)
        if home and os.path.exists(os.path.join(home, "bin", "nvcc")):
            return os.path.join(home, "bin", "nvcc")
    found = shutil.which("nvcc")
    if found:
        return found
    return "/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None


def cuda_arch_list() -> str:
    """TORCH_CUDA_ARCH_LIST for this host's GPUs, as torch picks it for visible GPUs when the
    variable is unset (each GPU's arch, PTX for the newest); the variable itself where set."""
    if os.environ.get("TORCH_CUDA_ARCH_LIST"):
        return os.environ["TORCH_CUDA_ARCH_LIST"]
    caps = sorted({c for c in nvml_capabilities() or [] if c != (0, 0)})
    if not caps:
        return ""
    archs = [f"{a}.{b}" for a, b in caps]
    archs[-1] += "+PTX"
    return ";".join(archs)


@functools.cache
def build_env(device: str) -> dict[str, str]:
    """What a build's output depends on besides its own arguments."""
    cxx = os.environ.get("CXX", "c++")
    env = {
        "torch": _torch_identity(),
        "python": f"{sys.implementation.cache_tag}-{platform.machine()}",
        "cxx": _first_line([cxx, "--version"]),
        "device": device,
        "arch": "",
        "nvcc": "",
    }
    if device == "cuda":
        env["arch"] = cuda_arch_list()
        nvcc = nvcc_path()
        env["nvcc"] = _first_line([nvcc, "--version"], last=True) if nvcc else ""
    return env


def process_env(env: dict[str, str], jobs: int) -> dict[str, str]:
    """Environment variables of a process that builds (or loads) for `env`."""
    out = {"MAX_JOBS": str(jobs)}
    if env.get("arch"):
        out["TORCH_CUDA_ARCH_LIST"] = env["arch"]
    # torch runs `ninja` from PATH: the one installed beside this Python (pip's ninja) counts too.
    bindir = os.path.dirname(sys.executable)
    out["PATH"] = os.pathsep.join(p for p in (bindir, os.environ.get("PATH", "")) if p)
    return out
