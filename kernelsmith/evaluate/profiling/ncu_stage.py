"""The counters stage: Nsight Compute on one forward call of a candidate, after its verdict.

Informational and on request only (`eval --profile`, the search's new island bests): it runs in
the judge between evaluations, so it never overlaps a verdict's timing on its GPU, under its own
time limit. ncu replays each kernel once per metric pass with caches flushed (`--cache-control
all`) and leaves the GPU's clocks as they are (`--clock-control none`: this tool never changes
a card's settings). Where ncu is missing, not permitted to read the counters, or fails, the
report says so and the verdict is untouched.

Containment of the profiled process (ncu_target.py): the sandbox's /proc masks, Landlock and
seccomp where the host has them, and a network namespace of its own for ncu and its target
(ncu's injection talks to the front end over loopback TCP, so Landlock cannot close TCP there).
Without root there is no network namespace: the report's `contained` says so, and under
KERNELSMITH_SANDBOX=strict the stage refuses to run.
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kernelsmith.evaluate.counters import (
    DEFAULT_TIMEOUT,
    METRICS,
    CountersReport,
    merge_launches,
    ncu_path,
    parse_ncu_csv,
)
from kernelsmith.evaluate.sandboxing import containment
from kernelsmith.evaluate.sandboxing.process import kill_tree, scrubbed_env
from kernelsmith.evaluate.sandboxing.sandbox_handle import sandbox_cache_env

KEEP = 3  # kernels a report keeps (heaviest first)
MAX_LAUNCHES = 24  # kernel launches profiled in the one forward call
_CLONE_NEWNET = 0x40000000
_PERMISSION = ("ERR_NVGPUCTRPERM", "does not have permission to access NVIDIA GPU Performance Counters")


@functools.lru_cache(maxsize=4)
def ncu_version(path: str) -> str:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return path
    last = [ln for ln in out.splitlines() if ln.strip()]
    return f"{path} ({last[-1].strip()})" if last else path


def command(ncu: str, workdir: Path, netns: bool) -> list[str]:
    cmd = [
        ncu,
        "--csv",
        "--print-units",
        "base",
        "--clock-control",
        "none",
        "--cache-control",
        "all",
        "--profile-from-start",
        "off",
        "--launch-count",
        str(MAX_LAUNCHES),
        "--metrics",
        ",".join(METRICS),
        sys.executable,
        "-m",
        "kernelsmith.evaluate.profiling.ncu_target",
        str(workdir),
    ]
    return [sys.executable, "-m", "kernelsmith.evaluate.profiling.ncu_stage", str(workdir), *cmd] if netns else cmd


def _why(output: str, returncode: int) -> str:
    """The one line that explains a failed run: the target's own error (the last line of its
    traceback) when it died, else ncu's first error, else the last line printed."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip() and not ln.startswith('"')]
    errors = [ln for ln in lines if ln.startswith("==ERROR==")]
    tail = [ln for ln in lines if not ln.startswith("==")]
    # ncu only says "The application returned an error code (1)" for a target that raised
    died = not errors or any("application returned an error code" in e for e in errors)
    if died and tail:
        return tail[-1][:300]
    return (errors[0] if errors else f"ncu exited with status {returncode}")[:300]


def profile(task_source: str, candidate_source: str, timeout: float = DEFAULT_TIMEOUT, seed: int = 0) -> CountersReport:
    """Counters of the candidate's heaviest kernels (CUDA), or a report of why there are none."""
    t0 = time.monotonic()
    ncu = ncu_path()
    if ncu is None:
        return CountersReport(status="missing", message="Nsight Compute (ncu) is not installed here")
    plan = containment.plan("cuda")
    layers = [name for name in plan.on if name in ("procmask", "landlock", "seccomp")]
    netns = os.geteuid() == 0 and plan.mode != "none"
    contained = {"network": "a network namespace of its own" if netns else "off: not root, no network namespace"}
    if plan.mode == "strict" and not netns:
        return CountersReport(
            status="unsupported",
            message="KERNELSMITH_SANDBOX=strict: the profiled process cannot be kept off the network here (not root)",
            contained=contained,
        )
    workdir = Path(tempfile.mkdtemp(prefix="ks-ncu-"))
    try:
        (workdir / "task.py").write_text(task_source)
        (workdir / "candidate.py").write_text(candidate_source)
        (workdir / "spec.json").write_text(json.dumps({"layers": layers, "seed": seed, "warmup": 2}))
        env = scrubbed_env(sandbox_cache_env(workdir))
        env.pop("TRITON_INTERPRET", None)
        proc = subprocess.Popen(
            command(ncu, workdir, netns),
            env=env,
            cwd=workdir,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            output, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_tree(proc)
            return CountersReport(
                status="timeout",
                message=f"profiling ran past its limit of {timeout:g} s",
                seconds=time.monotonic() - t0,
                tool=ncu_version(ncu),
                contained=contained,
            )
        finally:
            kill_tree(proc)
        try:
            contained["network"] = (workdir / "network.txt").read_text().strip() or contained["network"]
        except OSError:
            pass
        try:
            contained.update(json.loads((workdir / "contained.json").read_text()))
        except (OSError, ValueError):
            pass
        launches = parse_ncu_csv(output)
        seconds, tool = time.monotonic() - t0, ncu_version(ncu)
        if any(p in output for p in _PERMISSION):
            return CountersReport(
                status="not_permitted",
                message=_why(output, proc.returncode),
                seconds=seconds,
                tool=tool,
                contained=contained,
            )
        if proc.returncode != 0 or not launches:
            why = _why(output, proc.returncode) if proc.returncode != 0 else "ncu profiled no kernel"
            return CountersReport(status="failed", message=why, seconds=seconds, tool=tool, contained=contained)
        return CountersReport(
            status="ok",
            kernels=merge_launches(launches, KEEP),
            launches=len(launches),
            seconds=seconds,
            tool=tool,
            contained=contained,
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _exec_in_network_namespace(workdir: Path, argv: list[str]) -> None:
    """unshare a network namespace (root), bring its loopback up, then exec `argv` in it. Where
    the host refuses one (root without CAP_SYS_ADMIN), `argv` runs without it, unless
    KERNELSMITH_SANDBOX=strict; network.txt says which."""
    import fcntl
    import socket
    import struct

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(_CLONE_NEWNET) != 0:
        why = f"off: unshare(CLONE_NEWNET) failed: {os.strerror(ctypes.get_errno())}"
        (workdir / "network.txt").write_text(why)
        if containment.sandbox_mode() == "strict":
            sys.exit(f"==ERROR== KERNELSMITH_SANDBOX=strict: no network namespace for the profiled process ({why})")
        os.execv(argv[0], argv)
    (workdir / "network.txt").write_text("on: a network namespace of its own, loopback only")
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    ifr = struct.pack("16sH14s", b"lo", 0, b"\0" * 14)
    flags = struct.unpack("16sH14s", fcntl.ioctl(s, 0x8913, ifr))[1]  # SIOCGIFFLAGS
    fcntl.ioctl(s, 0x8914, struct.pack("16sH14s", b"lo", flags | 0x1, b"\0" * 14))  # SIOCSIFFLAGS: IFF_UP
    s.close()
    os.execv(argv[0], argv)


if __name__ == "__main__":
    _exec_in_network_namespace(Path(sys.argv[1]), sys.argv[2:])
