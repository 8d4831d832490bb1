"""The one helper that spawns evaluation processes, watches their memory and kills their trees.

Process trees are psutil's (it checks a pid was not reused before it signals); what stays
hand-written is the memory watcher's /proc pass (a measured hot path, see tree_rss), the
process-group kill and the reaping of orphans (defences psutil has no call for), and prctl.
"""

from __future__ import annotations

import ctypes
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import kernelsmith
from kernelsmith.device import KINETO_QUIET

if TYPE_CHECKING:  # imported where used: a judge starts its first sandbox without waiting for psutil
    import psutil

# Variables whose names look like credentials never reach a candidate.
_SECRET = re.compile(r"(KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION)", re.IGNORECASE)


def scrubbed_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not _SECRET.search(k)}
    env.update(extra or {})
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    for name, value in KINETO_QUIET.items():  # no profiler chatter in sandbox and judge logs
        env.setdefault(name, value)
    # The package must import in the child even when it is run from a source checkout.
    root = str(Path(kernelsmith.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env


def sandbox_cache_env(workdir: Path) -> dict[str, str]:
    """HOME, TMPDIR and the compiler caches of a sandbox, all inside its scratch directory."""
    return {
        "HOME": str(workdir),
        "TMPDIR": str(workdir),
        "TRITON_CACHE_DIR": str(workdir / ".triton" / "cache"),
        "TORCHINDUCTOR_CACHE_DIR": str(workdir / ".inductor"),
        "TORCH_EXTENSIONS_DIR": str(workdir / ".torch_extensions"),
        "XDG_CACHE_HOME": str(workdir / ".cache"),
    }


def spawn_python(
    module: str,
    args: list[str],
    *,
    env: dict[str, str],
    pass_fds=(),
    cwd=None,
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
    wrapper: list[str] | None = None,
) -> subprocess.Popen:
    """Start `python -m module args` in its own session (so its whole group can be killed),
    optionally inside `wrapper` (a sandboxing command line)."""
    return subprocess.Popen(
        [*(wrapper or []), sys.executable, "-m", module, *args],
        env=env,
        pass_fds=tuple(pass_fds),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        start_new_session=True,
        close_fds=True,
    )


def become_subreaper() -> None:
    """Orphans of our children re-parent to us, so a detached grandchild can still be found and killed."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
        except (OSError, AttributeError):
            pass


def die_with_parent(parent_pid: int) -> None:
    """Be killed when the process that started us dies, even by SIGKILL (Linux): a judge must not
    outlive the pool or the service that owns it, busy with a candidate nobody waits for."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            return
        if os.getppid() != parent_pid:  # it died before the prctl took effect
            os._exit(1)


def _children_map() -> dict[int, list[int]]:
    """{ppid: [pid, ...]} from one pass over /proc/*/stat, skipping entries it may not read."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        # pid (comm) state ppid ...; comm may hold spaces and parentheses
        ppid = int(stat[stat.rfind(b")") + 2 :].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    return children


def _walk(children: dict[int, list[int]], pid: int) -> list[int]:
    """`pid` and its descendants in `children`, parents before their children."""
    out, stack, seen = [], [pid], set()
    while stack:
        p = stack.pop()
        if p not in seen:  # a pid reused while /proc was read can make a cycle
            seen.add(p)
            out.append(p)
            stack += children.get(p, [])
    return out


def _processes(pids: list[int]) -> list[psutil.Process]:
    import psutil

    out = []
    for pid in pids:
        try:
            out.append(psutil.Process(pid))
        except psutil.Error:
            pass
    return out


def _tree(pid: int, recursive: bool = True) -> list[psutil.Process]:
    """The process `pid` and its descendants (or only its children), parents first; [] if it is gone."""
    import psutil

    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=recursive)]
    except psutil.AccessDenied:
        # Hand-written fallback, a defence: one /proc entry we may not read (hidepid=1) fails psutil's
        # whole walk, where ours skips it.
        children = _children_map()
        return _processes(_walk(children, pid) if recursive else [pid, *children.get(pid, [])])
    except psutil.Error:
        return []


def descendants(pid: int) -> list[int]:
    return [p.pid for p in _tree(pid)[1:]]


def rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def tree_rss(pid: int) -> int:
    """Resident bytes of `pid` and its descendants."""
    # Hand-written on purpose, a measured hot path: the sandbox's memory watcher calls this every 50 ms,
    # and psutil's children() + memory_info() (which read each child's stat again) cost ~10-20% more CPU.
    if not os.path.isdir("/proc"):
        return rss_bytes(pid)
    return sum(rss_bytes(p) for p in _walk(_children_map(), pid))


class Proc(Protocol):
    """What kill_tree needs of a process: a Popen, or a sandbox forked from a template."""

    pid: int
    returncode: int | None

    def wait(self, timeout: float | None = None) -> int: ...


def kill_tree(proc: Proc, extra_pids: list[int] | None = None) -> None:
    """SIGKILL the process, its group, every descendant and any `extra_pids`; reap the process."""
    import psutil

    procs = _tree(proc.pid) if proc.returncode is None else []  # once reaped, its pid may be another's
    procs += _processes(extra_pids or [])
    # Hand-written on purpose, a defence: the group kill also reaches members that left the tree.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for p in procs:
        try:
            p.kill()
        except psutil.Error:
            pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
    reap([p.pid for p in procs if p.pid != proc.pid])


def reap(pids: list[int]) -> None:
    """Collect killed orphans that re-parented to us (as their subreaper), so none stay zombies."""
    # Hand-written on purpose: psutil.wait_procs would wait out the timeout on a pid that is not our
    # child; waitpid gives up on it at once.
    deadline = time.monotonic() + 2.0
    for p in pids:
        while True:
            try:
                done, _ = os.waitpid(p, os.WNOHANG)
            except ChildProcessError:  # not our child, or already collected
                break
            if done or time.monotonic() > deadline:
                break
            time.sleep(0.005)


def kill_uid(uid: int) -> list[int]:
    """SIGKILL every process whose real or effective uid is `uid` (a sandbox's own uid); reap ours."""
    import psutil

    killed = []
    for proc in psutil.process_iter(["uids"]):
        uids = proc.info.get("uids")
        if uids is not None and uid in (uids.real, uids.effective):
            try:
                proc.kill()
                killed.append(proc.pid)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass
    reap(killed)
    return killed


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"killed by {name}"
    if 128 < returncode < 128 + 65:  # a shell or bubblewrap reports a child's signal this way
        try:
            return f"killed by {signal.Signals(returncode - 128).name} (exit code {returncode})"
        except ValueError:
            pass
    return f"exited with code {returncode}"


def _session(pid: int) -> int | None:
    try:
        return os.getsid(pid)
    except (ProcessLookupError, PermissionError):
        return None


def kill_strays(keep: set[int]) -> list[int]:
    """Kill our children in other sessions than ours (and their trees), except `keep`.

    With `become_subreaper`, a process a candidate detached (double fork, setsid) re-parents to
    us when its parent dies; this finds and ends it. Our own helpers (torch.compile's workers)
    share our session and are left alone; sandboxes have sessions of their own, so the live
    ones are passed in `keep`. Returns the pids killed.
    """
    import psutil

    mine = os.getsid(0)
    ours = _tree(os.getpid(), recursive=False)[1:]
    strays = [p for p in ours if p.pid not in keep and _session(p.pid) not in (None, mine)]
    killed = []
    for stray in strays:
        for p in _tree(stray.pid):  # parents first: a killed parent forks no more
            try:
                p.kill()
                killed.append(p.pid)
            except psutil.Error:
                pass
    reap(killed)
    return killed


def pause_tree(proc: Proc) -> None:
    """SIGSTOP the process, its group and its descendants (a sandbox loaded ahead, kept still while
    another candidate is timed); resume_tree undoes it."""
    _signal_tree(proc, signal.SIGSTOP)


def resume_tree(proc: Proc) -> None:
    _signal_tree(proc, signal.SIGCONT)


def _signal_tree(proc: Proc, sig: int) -> None:
    import psutil

    if proc.returncode is not None:
        return
    try:
        os.killpg(proc.pid, sig)  # a defence, as in kill_tree: members that left the tree are in its group
    except (ProcessLookupError, PermissionError):
        pass
    for p in _tree(proc.pid):
        try:
            p.send_signal(sig)
        except psutil.Error:
            pass
