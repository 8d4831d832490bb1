"""Start `kernelsmith serve` as a user would (a subprocess on 127.0.0.1, port 0) and talk to it."""

from __future__ import annotations

import json
import os
import re
import selectors
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from conftest import REPO

KERNELSMITH = Path(sys.executable).parent / "kernelsmith"
SOFTMAX_TASK = REPO / "examples/softmax/task.py"
SOFTMAX_HONEST = REPO / "examples/softmax/triton_softmax.py"
REDTEAM = REPO / "tests/redteam/candidates"
START_WAIT = 180.0
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def variant(tag: str, sleep_s: float = 0.0) -> str:
    """The honest softmax with a distinguishing module constant (a new program hash, the same
    kernel: a comment would not do, kernelsmith.identity), and optionally a sleep in forward so
    that an evaluation lasts long enough to be interrupted."""
    code = SOFTMAX_HONEST.read_text() + f"\nVARIANT = {tag!r}\n"
    if sleep_s:
        code = code.replace(
            "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n",
            f"    def forward(self, x: torch.Tensor) -> torch.Tensor:\n        __import__('time').sleep({sleep_s})\n",
            1,
        )
        assert "sleep" in code
    return code


@dataclass
class Served:
    proc: subprocess.Popen
    url: str
    log: Path

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def start_service(log_dir: Path, *args: str, env: dict | None = None) -> Served:
    log = log_dir / f"serve-{time.monotonic_ns()}.log"
    with open(log, "wb") as err:
        proc = subprocess.Popen(
            [str(KERNELSMITH), "serve", "--device", "cpu", "--host", "127.0.0.1", "--port", "0", *args],
            stdout=subprocess.PIPE,
            stderr=err,
            cwd=REPO,
            env={**os.environ, **(env or {})},
        )
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    end = time.monotonic() + START_WAIT
    line = b""
    while time.monotonic() < end and not line.endswith(b"\n"):
        if sel.select(timeout=1.0):
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                break
            line += chunk
        elif proc.poll() is not None:
            break
    m = re.search(rb"serving on (http://\S+)", line)
    if not m:
        proc.kill()
        raise AssertionError(f"service did not start: {line!r}\n{log.read_text(errors='replace')}")
    return Served(proc, m.group(1).decode(), log)


def http(
    method: str, url: str, body: dict | bytes | None = None, headers: dict | None = None, timeout: float = 300.0
) -> tuple[int, object, object]:
    """(status, headers (case-insensitive), parsed JSON body) without raising on 4xx/5xx."""
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json", **(headers or {})}
    )
    try:
        with _NO_PROXY.open(req, timeout=timeout) as resp:
            return resp.status, resp.headers, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        return exc.code, exc.headers, json.loads(raw) if raw else None


def evaluate_body(candidate: str, task: Path = SOFTMAX_TASK, **options) -> dict:
    return {
        "task_source": task.read_text(),
        "task_name": task.stem,
        "candidate_source": candidate,
        "device": "cpu",
        "trials": 2,
        "timeout": 120,
        "memory_limit": "1G",
        **options,
    }


def judges(pid: int) -> list[int]:
    """The judge processes below `pid` (the pool's workers, each the parent of its sandboxes)."""
    from kernelsmith.evaluate.sandboxing.process import descendants

    out = []
    for p in descendants(pid):
        try:
            cmd = Path(f"/proc/{p}/cmdline").read_bytes()
        except OSError:
            continue
        if b"kernelsmith.evaluate.judging.worker" in cmd:
            out.append(p)
    return out
