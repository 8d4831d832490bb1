"""What keeps a candidate in its sandbox: layers chosen at start-up from what the host allows,
and the five guarantees they add up to.

Layers (each optional, each tested; `KERNELSMITH_SANDBOX_LAYERS` picks a subset, default all):
- `bwrap`: Debian's bubblewrap around the sandbox: read-only root, a network namespace, on the
  CPU a PID namespace (isolation.py).
- `pidns` (CPU, root, without bubblewrap): a PID and mount namespace of the sandbox's own with a
  fresh /proc, so no other process is visible, and all of its processes die with it.
- `uid` (CPU): where the judge runs as root, the sandbox drops to a uid/gid of its own (one per
  sandbox): other processes' /proc files, signals and root's files are out of reach. Needs the
  Python environment readable by other users. Not on CUDA: CUDA IPC maps no memory across uids
  (measured on the H200, benchmarks/probes/cuda_ipc.py).
- `procmask` (root, where there is no PID namespace: CUDA): a mount namespace in which every other
  process's /proc entry is covered, and no capabilities once CUDA is up (procmask.py).
- `landlock`: applied before torch is imported, while the sandbox has one thread: writes only to
  its scratch directory (and, on CUDA, /dev/shm and the GPU's device files), no TCP (ABI 4),
  signals scoped to its own processes (ABI 6), no ptrace attach (/proc/PID/mem) to processes
  outside it. It does not stop reads of /proc/PID/environ (a ptrace *read* check, which Landlock
  allows: measured on Linux 6.18), so it does not count for the secrets guarantee (landlock.py).
- `seccomp`: after CUDA is up, on every thread: no new sockets, no ptrace or process_vm_*, signals
  only to itself (seccomp.py).
Whatever the layers, the judge kills the sandbox's process tree after each evaluation and, as
the subreaper of its children, any process the candidate detached.

On CUDA (verified on the H200, benchmarks/results/archive/containment_h200_2026-12-03_run2.log): Landlock
allows writes beneath the sandbox's own /proc/self/task, where cuInit names its threads (without
it CUDA fails to start, error 304); `uid` is off (CUDA IPC); `procmask` keeps the secrets.

`KERNELSMITH_SANDBOX`: `auto` (default: every layer the host allows), `strict` (refuse to
evaluate unless all five guarantees hold), `bwrap` (auto, and bubblewrap is required), `none`
(no layer at all: for debugging a candidate on a trusted machine).
"""

from __future__ import annotations

import os
import secrets
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path

import kernelsmith
from kernelsmith.errors import UserError
from kernelsmith.evaluate.sandboxing import isolation, landlock, procmask, seccomp

LAYERS = ("bwrap", "pidns", "uid", "procmask", "landlock", "seccomp")
GUARANTEES = {
    "secrets": "cannot read another process's secrets (/proc/PID/environ, memory)",
    "writes": "cannot write outside its scratch directory",
    "signals": "cannot signal or trace another process",
    "network": "cannot reach the network (loopback included)",
    "processes": "leaves no process running after its evaluation",
}
MODES = ("auto", "strict", "bwrap", "none")
# Sandbox uids: one per sandbox, far above any real account's.
UID_BASE, UID_SPAN = 0x3A000000, 1 << 24


class ContainmentError(Exception):
    """A sandbox could not be contained as KERNELSMITH_SANDBOX=strict demands (not the candidate's fault)."""


def sandbox_mode() -> str:
    wanted = os.environ.get("KERNELSMITH_SANDBOX", "auto")
    if wanted not in MODES:
        raise UserError(f"KERNELSMITH_SANDBOX={wanted!r}: use one of {', '.join(MODES)}")
    return wanted


def wanted_layers() -> tuple[str, ...]:
    raw = os.environ.get("KERNELSMITH_SANDBOX_LAYERS")
    if raw is None:
        return LAYERS
    names = tuple(n.strip() for n in raw.split(",") if n.strip())
    bad = [n for n in names if n not in LAYERS]
    if bad:
        raise UserError(f"KERNELSMITH_SANDBOX_LAYERS: unknown layer {bad[0]!r} (known: {', '.join(LAYERS)})")
    return names


def _unreadable_by_others(paths: list[str]) -> str | None:
    """The first directory on the way to `paths` that an unprivileged uid cannot enter."""
    for target in paths:
        p = Path(target).resolve()
        for d in [*reversed(p.parents), p]:
            try:
                mode = d.stat().st_mode
            except OSError:
                continue
            if stat.S_ISDIR(mode) and (mode & 0o005) != 0o005:
                return f"{d} (mode {stat.S_IMODE(mode):o})"
    return None


def _environment_dirs() -> list[str]:
    import importlib.util

    dirs = [sys.prefix, sys.base_prefix, str(Path(kernelsmith.__file__).resolve().parent)]
    for name in ("torch", "triton"):
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin:
            dirs.append(str(Path(spec.origin).parent))
    return dirs


@dataclass
class Plan:
    """The layers a sandbox gets on this host, and why the others are off."""

    device: str
    mode: str
    on: dict[str, str] = field(default_factory=dict)  # layer -> what it does here
    off: dict[str, str] = field(default_factory=dict)  # layer -> why not
    landlock_abi: int = 0

    def guarantees(self) -> dict[str, str | None]:
        """guarantee -> None when it holds, else why not."""
        on, abi = self.on, self.landlock_abi
        cpu_bwrap = ("bwrap" in on or "pidns" in on) and self.device == "cpu"  # a PID namespace
        holds = {
            # Not Landlock: it denies /proc/PID/mem (ptrace attach) but not /proc/PID/environ (read).
            "secrets": "uid" in on or "procmask" in on or cpu_bwrap,
            "writes": "landlock" in on or "bwrap" in on or "uid" in on,
            "signals": "uid" in on or ("landlock" in on and abi >= 6) or "seccomp" in on or cpu_bwrap,
            "network": "seccomp" in on or "bwrap" in on,
            "processes": True,
        }
        why = {
            "secrets": "no PID namespace, no uid of its own, no /proc masks: /proc/PID/environ of the "
            "processes that started it is readable (run as root; on the CPU, or with bubblewrap)",
            "writes": "no Landlock, no bubblewrap, no uid of its own: it writes wherever you can",
            "signals": "no uid of its own, no Landlock signal scoping (ABI 6), no seccomp: it can kill your processes",
            "network": "no seccomp filter and no network namespace: it can open sockets",
            "processes": "",
        }
        return {g: None if ok else why[g] for g, ok in holds.items()}

    def holds_all(self) -> bool:
        return all(v is None for v in self.guarantees().values())

    def strict_unmet(self) -> bool:
        """KERNELSMITH_SANDBOX=strict asks for all five guarantees and they do not all hold: refuse."""
        return self.mode == "strict" and not self.holds_all()

    def summary(self) -> dict:
        return {
            "mode": self.mode,
            "layers": {**{k: "on: " + v for k, v in self.on.items()}, **{k: "off: " + v for k, v in self.off.items()}},
            "guarantees": {
                g: ("holds" if why is None else "does not hold: " + why) for g, why in self.guarantees().items()
            },
        }


def plan(device: str) -> Plan:
    """Which layers a sandbox for `device` gets here (probed once per process per device)."""
    mode = sandbox_mode()
    p = Plan(device=device, mode=mode)
    if mode == "none":
        p.off = {name: "KERNELSMITH_SANDBOX=none" for name in LAYERS}
        return p
    wanted = wanted_layers()
    for name in LAYERS:
        if name not in wanted:
            p.off[name] = "left out by KERNELSMITH_SANDBOX_LAYERS"
    wanted = tuple(n for n in wanted if n not in p.off)
    if "bwrap" in wanted:
        if isolation.bwrap_works():
            p.on["bwrap"] = "read-only root, no network" + (
                ", own PID namespace" if device == "cpu" else " (PID namespace shared: CUDA IPC)"
            )
        else:
            p.off["bwrap"] = "bubblewrap is not installed or cannot run here"
    if "pidns" in wanted:
        if device != "cpu":
            p.off["pidns"] = "CUDA: IPC across PID namespaces is unverified"
        elif "bwrap" in p.on:
            p.off["pidns"] = "bubblewrap gives the sandbox its PID namespace"
        elif os.geteuid() != 0:
            p.off["pidns"] = "not running as root"
        else:
            p.on["pidns"] = "a PID namespace and /proc of its own"
    if "uid" in wanted:
        if device == "cuda":
            p.off["uid"] = "CUDA IPC maps no memory across uids (the sandbox's outputs could not reach the judge)"
        elif os.geteuid() != 0:
            p.off["uid"] = "not running as root: the sandbox keeps your uid"
        else:
            blocked = _unreadable_by_others(_environment_dirs())
            if blocked:
                p.off["uid"] = f"the Python environment is not readable by other users: {blocked}"
            else:
                p.on["uid"] = "an unprivileged uid/gid of its own per sandbox"
    if "procmask" in wanted:
        if "pidns" in p.on or ("bwrap" in p.on and device == "cpu"):
            p.off["procmask"] = "the sandbox has a PID namespace of its own"
        elif "uid" in p.on:
            p.off["procmask"] = "the sandbox has a uid of its own"
        elif os.geteuid() != 0:
            p.off["procmask"] = "not running as root: no mount namespace"
        else:
            p.on["procmask"] = "other processes' /proc entries covered, no capabilities"
    if "landlock" in wanted:
        abi = landlock.abi_version()
        if abi < 1:
            p.off["landlock"] = "the kernel has no Landlock (Linux 5.13+, enabled at boot)"
        else:
            p.landlock_abi = abi
            parts = ["writes to scratch only", "no ptrace attach"]
            parts += ["no TCP"] if abi >= 4 else []
            parts += ["signals scoped"] if abi >= 6 else []
            p.on["landlock"] = f"ABI {abi}: " + ", ".join(parts)
    if "seccomp" in wanted:
        if seccomp.supported():
            p.on["seccomp"] = "no sockets, no ptrace, signals to itself only"
        else:
            p.off["seccomp"] = f"no filter written for this platform ({sys.platform} {os.uname().machine})"
    if mode == "bwrap" and "bwrap" not in p.on:
        raise UserError("KERNELSMITH_SANDBOX=bwrap but bubblewrap is missing or cannot run here")
    return p


def check_strict(device: str) -> None:
    """With KERNELSMITH_SANDBOX=strict, refuse (one line) unless all five guarantees hold."""
    p = plan(device)
    if p.strict_unmet():
        missing = [f"{g} ({why})" for g, why in p.guarantees().items() if why]
        raise UserError(
            "KERNELSMITH_SANDBOX=strict: containment incomplete on this host: "
            + "; ".join(missing)
            + " (run `kernelsmith doctor`)"
        )


def new_uid() -> int:
    return UID_BASE + secrets.randbelow(UID_SPAN)


# -- applied in the sandbox ------------------------------------------------------------------------
def writable_paths(workdir: str, device: str) -> tuple[list[str], list[str]]:
    """(directories, files) a sandbox may write: its scratch, and what CUDA needs. Files (and
    what lies beneath a directory named among them) get plain writes only."""
    dirs = [workdir]
    files = ["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"]
    if device == "cuda":
        dirs.append("/dev/shm")  # CUDA IPC reference counters
        # cuInit names its threads through /proc/<pid>/task/<tid>/comm (pthread_setname_np); denied,
        # it fails with error 304 (found with Landlock by NVIDIA/OpenShell PR 710). Resolved in the
        # process that applies the rules, /proc/self/task is this sandbox's own task directory.
        files.append("/proc/self/task")
        try:
            files += [f"/dev/{n}" for n in os.listdir("/dev") if n.startswith("nvidia")]
            dirs += [f"/dev/{n}" for n in os.listdir("/dev") if n.startswith("nvidia") and os.path.isdir(f"/dev/{n}")]
        except OSError:
            pass
    return dirs, files


_CLONE_NEWNS, _CLONE_NEWPID = 0x00020000, 0x20000000
_MS_REC, _MS_PRIVATE, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 0x4000, 0x40000, 0x2, 0x4, 0x8


def enter_pid_namespace(fd: int) -> str:
    """unshare a PID and mount namespace; the caller forks: the child (pid 1 there) mounts a fresh
    /proc and goes on, the parent waits for it and exits with its status (the judge watches and
    kills the parent and its tree). When the child dies, the kernel kills every process left in
    its namespace. Returns the outcome for the child; the parent never returns."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(_CLONE_NEWPID | _CLONE_NEWNS) != 0:
        return f"failed: unshare: {os.strerror(ctypes.get_errno())}"
    pid = os.fork()
    if pid:
        os.close(fd)  # the child holds the channel: its death must close it for the judge
        _, status = os.waitpid(pid, 0)
        os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))
    if libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
        return f"failed: mount --make-rprivate /: {os.strerror(ctypes.get_errno())}"
    if libc.mount(b"proc", b"/proc", b"proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, None) != 0:
        return f"failed: mount /proc: {os.strerror(ctypes.get_errno())}"
    return "on: pid 1 of its own namespace"


def apply_early(layers: list[str], workdir: str, device: str) -> dict[str, str]:
    """Before torch is imported (one thread): /proc masks, then Landlock (which forbids mounts).
    Returns layer -> outcome."""
    out: dict[str, str] = {}
    if "procmask" in layers:
        try:
            out["procmask"] = f"on: {procmask.mask_other_processes(workdir)} /proc entries covered"
        except OSError as exc:
            out["procmask"] = f"failed: {exc}"
    if "landlock" in layers:
        threads = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else 1
        try:
            dirs, files = writable_paths(workdir, device)
            applied = landlock.restrict(dirs, files)
            out["landlock"] = f"on: ABI {applied.abi}" + ("" if threads == 1 else f" ({threads} threads before it)")
        except OSError as exc:
            out["landlock"] = f"failed: {exc}"
    return out


def apply_late(layers: list[str], uid: int | None, workdir: str) -> dict[str, str]:
    """After CUDA and the profiler are up: drop to `uid` or drop every capability (procmask), then
    seccomp. Returns layer -> outcome."""
    out: dict[str, str] = {}
    if "uid" in layers and uid is not None:
        try:
            for root, dirnames, filenames in os.walk(workdir):
                for name in [*dirnames, *filenames]:
                    os.lchown(os.path.join(root, name), uid, uid)
            os.chown(workdir, uid, uid)
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)  # glibc changes every thread's credentials
            out["uid"] = f"on: uid {uid}"
        except OSError as exc:
            out["uid"] = f"failed: {exc}"
    if "procmask" in layers:
        try:
            procmask.drop_capabilities()
        except OSError as exc:
            out["procmask"] = f"failed: {exc}"
    if "seccomp" in layers:
        try:
            seccomp.install()
            out["seccomp"] = "on"
        except OSError as exc:
            out["seccomp"] = f"failed: {exc}"
    return out
