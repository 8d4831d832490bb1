"""`kernelsmith doctor`: which of the five containment guarantees hold on this host, claimed by the
layers the host allows and checked live from inside a real sandbox (escape_probe.py)."""

from __future__ import annotations

import os
import socket
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import kernelsmith
from kernelsmith.evaluate.options import cache_dir
from kernelsmith.evaluate.sandboxing import containment
from kernelsmith.evaluate.sandboxing.process import become_subreaper
from kernelsmith.evaluate.sandboxing.sandbox_handle import SandboxHandle


@dataclass
class Checkup:
    plan: containment.Plan  # as the sandbox applied it
    live: dict[str, dict[str, str]]  # guarantee -> attempt -> outcome
    udp_received: bool

    def live_holds(self) -> dict[str, bool | None]:
        """guarantee -> contained in every attempt (None: not checked live)."""
        out: dict[str, bool | None] = {}
        for g in containment.GUARANTEES:
            tries = self.live.get(g)
            if not tries:
                out[g] = None
                continue
            ok = all(v.startswith("denied") for k, v in tries.items() if not k.startswith("udp"))
            if g == "network":
                ok = ok and not self.udp_received
            out[g] = ok
        return out

    def to_dict(self) -> dict:
        return {**self.plan.summary(), "live": self.live, "live_holds": self.live_holds()}


def _targets() -> list[str]:
    """Places a candidate must not write: the package, the project, home, the caches."""
    pkg = Path(kernelsmith.__file__).resolve().parent
    dirs = [pkg, pkg / "evaluate", Path.cwd(), Path.home(), cache_dir()]
    seen, out = set(), []
    for d in dirs:
        if d.is_dir() and str(d) not in seen:
            seen.add(str(d))
            out.append(str(d))
    return out


def checkup(device: str = "cpu", timeout: float = 120.0) -> Checkup:
    become_subreaper()
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(1)
    port = tcp.getsockname()[1]
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", port))
    udp.setblocking(False)
    logdir = Path(tempfile.mkdtemp(prefix="ks-doctor-"))
    sb = SandboxHandle(device, logdir)
    try:
        sb.wait_ready(time.monotonic() + timeout)
        pids = sorted({os.getpid(), os.getppid()} - {0, 1})
        sb.send({"op": "probe", "pids": pids, "dirs": _targets(), "port": port})
        msg = sb.wait(time.monotonic() + timeout, 2**62, "doctor's probe")
        received = False
        try:
            received = bool(udp.recv(16))
        except BlockingIOError:
            pass
        return Checkup(plan=sb.containment(), live=msg.get("results", {}), udp_received=received)
    finally:
        sb.close()
        tcp.close()
        udp.close()
        try:
            logdir.rmdir()
        except OSError:
            pass
