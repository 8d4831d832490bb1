"""A seccomp filter for the sandbox: no new sockets (no network of any family, loopback
included), no tracing or reading of other processes' memory, signals only to itself.

Hand-written BPF (about twenty instructions) rather than libseccomp: the GPU images we run on
do not all ship libseccomp or its Python binding, and the filter is a defence whose every
instruction should be readable here. Installed with SECCOMP_FILTER_FLAG_TSYNC, so every thread
of the process is bound, those torch and CUDA started earlier included.

Denied calls fail with EPERM (the candidate sees an ordinary error, the evaluation goes on).
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
from typing import TypedDict


class _Arch(TypedDict):
    audit: int
    seccomp: int
    x32_bit: int
    deny: dict[str, int]
    self_only: dict[str, int]


# Per architecture: audit arch, seccomp(2), and the calls to deny / to allow only on ourselves.
_ARCH: dict[str, _Arch] = {
    "x86_64": _Arch(
        audit=0xC000003E,
        seccomp=317,
        x32_bit=0x40000000,
        deny={
            "socket": 41,
            "ptrace": 101,
            "process_vm_readv": 310,
            "process_vm_writev": 311,
            "pidfd_getfd": 438,
            "pidfd_send_signal": 424,
            "io_uring_setup": 425,
            "bpf": 321,
        },
        self_only={"kill": 62, "tkill": 200, "tgkill": 234, "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297},
    ),
    "aarch64": _Arch(
        audit=0xC00000B7,
        seccomp=277,
        x32_bit=0,
        deny={
            "socket": 198,
            "ptrace": 117,
            "process_vm_readv": 270,
            "process_vm_writev": 271,
            "pidfd_getfd": 438,
            "pidfd_send_signal": 424,
            "io_uring_setup": 425,
            "bpf": 280,
        },
        self_only={"kill": 129, "tkill": 130, "tgkill": 131, "rt_sigqueueinfo": 138, "rt_tgsigqueueinfo": 240},
    ),
}

_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_OFF_NR, _OFF_ARCH, _OFF_ARG0 = 0, 4, 16  # struct seccomp_data; arg0's low 32 bits (little endian)
_SECCOMP_SET_MODE_FILTER, _SECCOMP_FILTER_FLAG_TSYNC = 1, 1
_PR_SET_NO_NEW_PRIVS = 38


def supported() -> bool:
    return platform.system() == "Linux" and platform.machine() in _ARCH


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k & 0xFFFFFFFF)


def program(self_pid: int, machine: str | None = None) -> bytes:
    """The filter: wrong arch or x32 -> EPERM; denied calls -> EPERM; signal calls -> allowed
    only when their first argument is `self_pid`; everything else allowed."""
    arch = _ARCH[machine or platform.machine()]
    deny = _RET_ERRNO | errno.EPERM
    out = [
        _insn(_LD_W_ABS, 0, 0, _OFF_ARCH),
        _insn(_JEQ_K, 1, 0, arch["audit"]),
        _insn(_RET_K, 0, 0, deny),
        _insn(_LD_W_ABS, 0, 0, _OFF_NR),
    ]
    if arch["x32_bit"]:
        out += [_insn(_JGE_K, 0, 1, arch["x32_bit"]), _insn(_RET_K, 0, 0, deny)]
    for nr in arch["deny"].values():
        out += [_insn(_JEQ_K, 0, 1, nr), _insn(_RET_K, 0, 0, deny)]
    # Signal calls: jump to the pid check (5 instructions from the end) on a match.
    self_only = list(arch["self_only"].values())
    for i, nr in enumerate(self_only):
        out.append(_insn(_JEQ_K, len(self_only) - i, 0, nr))
    out += [
        _insn(_RET_K, 0, 0, _RET_ALLOW),
        _insn(_LD_W_ABS, 0, 0, _OFF_ARG0),
        _insn(_JEQ_K, 0, 1, self_pid),
        _insn(_RET_K, 0, 0, _RET_ALLOW),
        _insn(_RET_K, 0, 0, deny),
    ]
    return b"".join(out)


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install() -> None:
    """Install the filter on every thread of this process. Raises OSError when refused."""
    if not supported():
        raise OSError(f"seccomp filter not written for {platform.system()} {platform.machine()}")
    code = program(os.getpid())
    buf = ctypes.create_string_buffer(code, len(code))
    prog = _Fprog(len=len(code) // 8, filter=ctypes.cast(buf, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    rc = libc.syscall(
        _ARCH[platform.machine()]["seccomp"],
        ctypes.c_uint(_SECCOMP_SET_MODE_FILTER),
        ctypes.c_uint(_SECCOMP_FILTER_FLAG_TSYNC),
        ctypes.byref(prog),
    )
    if rc != 0:  # > 0: the id of a thread that could not be synchronised
        raise OSError(ctypes.get_errno() if rc < 0 else 0, f"seccomp(SET_MODE_FILTER, TSYNC) failed ({rc})")
