"""The bubblewrap layer of the sandbox's containment (containment.py chooses the layers).

With bubblewrap (Debian's `bubblewrap`): the whole filesystem read-only, the sandbox's own
scratch directory writable, /dev/shm shared (CUDA IPC reference counters live there), no
network (a new network namespace), on the CPU a PID namespace of its own, and death with the
judge. Hosts without it (GPU images often lack it) rely on the other layers: uid, Landlock,
seccomp.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from pathlib import Path


@functools.cache
def bwrap_works() -> bool:
    exe = shutil.which("bwrap")
    if exe is None:
        return False
    probe = [
        exe,
        "--ro-bind",
        "/",
        "/",
        "--dev-bind",
        "/dev",
        "/dev",
        "--proc",
        "/proc",
        "--unshare-net",
        "--unshare-pid",
        "true",
    ]
    try:
        return subprocess.run(probe, capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def wrapper(workdir: Path, device: str, keep_setuid: bool = False, keep_mount: bool = False) -> list[str]:
    """The command prefix that isolates a sandbox whose scratch directory is `workdir`.

    On the CPU the sandbox also gets its own PID namespace, so /proc shows no other process
    (an ancestor's /proc/PID/environ would hold the user's secrets). On CUDA that is not done
    (CUDA IPC between the judge and a sandbox in another PID namespace is unverified): the
    procmask layer covers other processes' /proc entries instead.
    `keep_setuid`: keep the capabilities the sandbox needs to drop to its own uid (bubblewrap,
    run as root, drops all capabilities; they are gone again once the uid changes).
    `keep_mount`: keep CAP_SYS_ADMIN for the procmask layer's mounts (it drops every capability
    once CUDA is up, before any candidate code runs).
    """
    pid = ["--unshare-pid"] if device == "cpu" else []
    kept = (["CAP_SETUID", "CAP_SETGID", "CAP_CHOWN"] if keep_setuid else []) + (
        ["CAP_SYS_ADMIN"] if keep_mount else []
    )
    caps = [a for c in kept for a in ("--cap-add", c)]
    return [
        shutil.which("bwrap") or "bwrap",
        "--ro-bind",
        "/",
        "/",
        "--dev-bind",
        "/dev",
        "/dev",  # GPU device nodes
        "--bind",
        "/dev/shm",
        "/dev/shm",
        "--proc",
        "/proc",
        "--bind",
        str(workdir),
        str(workdir),
        "--unshare-net",
        *pid,
        "--die-with-parent",
        *caps,
        "--chdir",
        str(workdir),
    ]
