"""The filesystem and network view of a sandbox process.

With bubblewrap (Debian's `bubblewrap`): the whole filesystem read-only, the sandbox's own
scratch directory writable, /dev/shm shared (CUDA IPC reference counters live there), no
network (a new network namespace), on the CPU a PID namespace of its own, and death with the
judge. Without it, the sandbox still gets
a scrubbed environment, a private HOME/TMPDIR and its process tree killed, but can write where
the user can and reach the network: `KERNELSMITH_SANDBOX=bwrap` makes its absence an error.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

from kernelsmith.errors import UserError


@functools.cache
def bwrap_works() -> bool:
    exe = shutil.which("bwrap")
    if exe is None:
        return False
    probe = [exe, "--ro-bind", "/", "/", "--dev-bind", "/dev", "/dev", "--proc", "/proc", "--unshare-net",
             "--unshare-pid", "true"]
    try:
        return subprocess.run(probe, capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def mode() -> str:
    """'bwrap' or 'none', from KERNELSMITH_SANDBOX (auto | bwrap | none; default auto)."""
    wanted = os.environ.get("KERNELSMITH_SANDBOX", "auto")
    if wanted not in ("auto", "bwrap", "none"):
        raise UserError(f"KERNELSMITH_SANDBOX={wanted!r}: use auto, bwrap or none")
    if wanted == "none":
        return "none"
    if bwrap_works():
        return "bwrap"
    if wanted == "bwrap":
        raise UserError("KERNELSMITH_SANDBOX=bwrap but bubblewrap is missing or cannot run here")
    return "none"


def wrapper(workdir: Path, device: str) -> list[str]:
    """The command prefix that isolates a sandbox whose scratch directory is `workdir`.

    On the CPU the sandbox also gets its own PID namespace, so /proc shows no other process
    (an ancestor's /proc/PID/environ would hold the user's secrets). On CUDA that is not done
    yet: CUDA IPC between the judge and a sandbox in another PID namespace is unverified.
    """
    if mode() != "bwrap":
        return []
    pid = ["--unshare-pid"] if device == "cpu" else []
    return [
        shutil.which("bwrap") or "bwrap",
        "--ro-bind", "/", "/",
        "--dev-bind", "/dev", "/dev",  # GPU device nodes
        "--bind", "/dev/shm", "/dev/shm",
        "--proc", "/proc",
        "--bind", str(workdir), str(workdir),
        "--unshare-net",
        *pid,
        "--die-with-parent",
        "--chdir", str(workdir),
    ]
