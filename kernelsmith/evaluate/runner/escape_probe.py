"""`kernelsmith doctor`'s live check, run inside a contained sandbox (trusted code, no candidate):
try each escape the containment must stop, and report what happened. Side effects are undone
(a file that could be created is removed at once; signal 0 kills nothing)."""

from __future__ import annotations

import os
import secrets
import socket


def _try(fn) -> str:
    try:
        return "allowed: " + str(fn() or "")
    except OSError as exc:
        return f"denied: {type(exc).__name__}: {exc.strerror or exc}"


def probe(job: dict) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {"secrets": {}, "writes": {}, "signals": {}, "network": {}}
    for pid in job.get("pids", []):

        def read(pid=pid):
            with open(f"/proc/{pid}/environ", "rb") as fh:
                return f"{len(fh.read())} bytes of the environment of process {pid}"

        out["secrets"][f"/proc/{pid}/environ"] = _try(read)
        out["signals"][f"signal 0 to {pid}"] = _try(lambda pid=pid: os.kill(pid, 0))
    for d in job.get("dirs", []):

        def write(d=d):
            path = os.path.join(d, f".ks-doctor-{secrets.token_hex(4)}")
            with open(path, "x") as fh:
                fh.write("x")
            os.unlink(path)
            return "created (and removed)"

        out["writes"][d] = _try(write)
    port = job.get("port")
    if port:

        def tcp():
            with socket.create_connection(("127.0.0.1", int(port)), timeout=2):
                return "connected"

        def udp():
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.sendto(b"x", ("127.0.0.1", int(port)))
                return "sent"

        out["network"][f"tcp 127.0.0.1:{port}"] = _try(tcp)
        out["network"][f"udp 127.0.0.1:{port}"] = _try(udp)
    return out
