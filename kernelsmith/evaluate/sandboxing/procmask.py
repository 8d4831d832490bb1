"""The `procmask` layer: other processes' /proc entries out of a sandbox's reach where it can have
neither a PID namespace nor a uid of its own (CUDA, as root).

On CUDA the sandbox shares the judge's PID namespace and uid: CUDA IPC, which carries its outputs
to the judge, maps no memory across uids ("mapping of buffer object failed", measured on the H200,
driver 580, benchmarks/probes/cuda_ipc.py) nor, by the project's earlier finding, across PID
namespaces. So the secrets of the processes that started it (/proc/PID/environ) are kept from it
this way instead:
- early (root, one thread, before Landlock, which forbids mounts): a mount namespace of its own,
  in which every /proc/PID and /proc/TID entry of another process that exists at that moment is
  covered by an empty, read-only tmpfs. The sandbox's ancestors, the judge and the service all
  exist before it, so none of them is readable.
- late (after CUDA is up): every capability dropped, from the bounding set too, so the candidate
  cannot unmount the covers or mount a /proc of its own (Landlock forbids both as well).

Hand-written on ctypes (no library covers mounts and capabilities without a C extension);
standard library only, as it runs before torch is imported.
"""

from __future__ import annotations

import ctypes
import os

_CLONE_NEWNS = 0x00020000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_BIND, _MS_REC, _MS_PRIVATE = (
    0x1,
    0x2,
    0x4,
    0x8,
    0x1000,
    0x4000,
    0x40000,
)
_PR_CAPBSET_DROP = 24
_CAP_VERSION_3 = 0x20080522


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _err(what: str) -> OSError:
    errno = ctypes.get_errno()
    return OSError(errno, f"{what}: {os.strerror(errno)}")


def other_entries(me: int) -> list[str]:
    """/proc/PID for every process but `me`, and /proc/TID for their other threads (a thread's
    id is looked up at /proc's top level although it is not listed there)."""
    out: list[str] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        out.append(f"/proc/{entry}")
        try:
            out += [f"/proc/{tid}" for tid in os.listdir(f"/proc/{entry}/task") if tid != entry]
        except OSError:
            pass  # it exited meanwhile
    return out


def mask_other_processes(scratch: str) -> int:
    """Enter a mount namespace of its own and cover other processes' /proc entries. Returns how
    many were covered; raises OSError when the namespace or the cover cannot be made."""
    libc = _libc()
    if libc.unshare(_CLONE_NEWNS) != 0:
        raise _err("unshare(CLONE_NEWNS)")
    if libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        raise _err("mount --make-rprivate /")
    empty = os.path.join(scratch, ".procmask")
    os.makedirs(empty, exist_ok=True)
    flags = _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    if libc.mount(b"none", empty.encode(), b"tmpfs", flags, b"size=4k,mode=0500") != 0:
        raise _err("mount tmpfs")
    covered = 0
    for path in other_entries(os.getpid()):
        if libc.mount(empty.encode(), path.encode(), None, _MS_BIND, None) == 0:
            covered += 1
        elif os.path.isdir(path):  # still there, yet not covered
            raise _err(f"cover {path}")
    return covered


def drop_capabilities() -> None:
    """Every capability of this process gone, from the bounding set too (uid stays as it is)."""
    libc = _libc()
    cap = 0
    while libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) == 0:
        cap += 1
    if cap == 0:
        raise _err("prctl(PR_CAPBSET_DROP)")
    header = (ctypes.c_uint32 * 2)(_CAP_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable x 2 words: all empty
    if libc.capset(header, data) != 0:
        raise _err("capset")


def capabilities() -> int:
    """This process's effective capabilities (a bit mask), from /proc/self/status."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    return 0
