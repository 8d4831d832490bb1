"""Landlock (Linux 5.13+) for the sandbox: writes only beneath given paths, no TCP, signals and
abstract unix sockets scoped to the sandbox's own processes.

Hand-written on ctypes because the one PyPI binding (`landlock`, 1.0.0.dev5) covers filesystem
rules only; the sandbox also needs the TCP rights (ABI 4) and scoping (ABI 6). Standard library
only: the sandbox applies this before it imports torch, while it still has a single thread
(a Landlock domain binds the calling thread and the threads it creates later, not earlier ones).

A Landlock domain also denies ptrace attach to processes outside it (so /proc/PID/mem), but not
the ptrace *read* check that guards /proc/PID/environ: measured on Linux 6.18 (ABI 7), a
landlocked child still reads its parent's environment. Secrets need another layer (containment.py).
"""

from __future__ import annotations

import ctypes
import os
import platform
from dataclasses import dataclass

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446  # the same on x86_64 and aarch64
_VERSION_FLAG = 1
_RULE_PATH_BENEATH, _RULE_NET_PORT = 1, 2
_PR_SET_NO_NEW_PRIVS = 38

# Filesystem rights that change something (reads and execution stay unrestricted).
FS_WRITE_FILE = 1 << 1
_FS_WRITES_V1 = (
    FS_WRITE_FILE | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12)
)  # write, remove dir/file, make char/dir/reg/sock/fifo/block/sym
_FS_REFER, _FS_TRUNCATE = 1 << 13, 1 << 14  # ABI 2, ABI 3
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6


_PINNED: list[int] = []  # O_PATH descriptors of procfs rules (restrict)


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def abi_version() -> int:
    """The kernel's Landlock ABI (0: none, or not Linux, or disabled at boot)."""
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "aarch64"):
        return 0
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    version = libc.syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_VERSION_FLAG))
    return max(int(version), 0)


@dataclass(frozen=True)
class Applied:
    abi: int
    tcp: bool  # TCP bind and connect denied
    scoped: bool  # signals and abstract unix sockets confined to the sandbox's processes


def restrict(
    write_dirs: list[str],
    write_files: list[str],
    *,
    fs: bool = True,
    tcp: bool = True,
    scope_signal: bool = True,
    scope_unix: bool = True,
) -> Applied:
    """Confine this process (and what it starts later): writes only beneath `write_dirs`, plain
    writes to `write_files` (devices), no TCP where the ABI has it, scoped signals and abstract
    unix sockets where it has them. The keywords leave a part out. Raises OSError when the kernel
    refuses."""
    abi = abi_version()
    if abi < 1:
        raise OSError("Landlock is not available in this kernel")
    handled_fs = (_FS_WRITES_V1 | (_FS_REFER if abi >= 2 else 0) | (_FS_TRUNCATE if abi >= 3 else 0)) if fs else 0
    tcp = tcp and abi >= 4
    scoped = ((_SCOPE_ABSTRACT_UNIX if scope_unix else 0) | (_SCOPE_SIGNAL if scope_signal else 0)) if abi >= 6 else 0
    attr = _RulesetAttr(
        handled_access_fs=handled_fs, handled_access_net=(_NET_BIND_TCP | _NET_CONNECT_TCP) if tcp else 0, scoped=scoped
    )
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else (16 if abi >= 4 else 8)
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    ruleset = libc.syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    try:
        rules = (
            []
            if not fs
            else [(d, handled_fs) for d in write_dirs]
            + [(f, FS_WRITE_FILE | (_FS_TRUNCATE if abi >= 3 else 0)) for f in write_files]
        )
        for path, access in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # a path that does not exist needs no rule
            try:
                rule = _PathBeneathAttr(
                    allowed_access=access if os.path.isdir(path) else access & (FS_WRITE_FILE | _FS_TRUNCATE),
                    parent_fd=fd,
                )
                if (
                    libc.syscall(
                        _ADD_RULE,
                        ctypes.c_int(ruleset),
                        ctypes.c_int(_RULE_PATH_BENEATH),
                        ctypes.byref(rule),
                        ctypes.c_uint32(0),
                    )
                    < 0
                ):
                    raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
            finally:
                if path.startswith("/proc/"):
                    # A rule binds an inode, and procfs drops an unused one (a later lookup makes a new
                    # inode, without the rule): held open for the process's life, it stays.
                    _PINNED.append(fd)
                else:
                    os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if libc.syscall(_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) < 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(ruleset)
    return Applied(abi=abi, tcp=tcp, scoped=bool(scoped & _SCOPE_SIGNAL))
