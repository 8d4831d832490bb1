"""The judge's side of a sandbox template (kernelsmith.evaluate.runner.template): start it, ask it for
a forked sandbox, and watch that sandbox as `subprocess.Popen` would (pid, poll, wait, returncode), so
SandboxHandle and process.kill_tree treat a forked sandbox and a spawned one alike.

A sandbox's status comes from the template, its parent, which keeps it a zombie until asked: the judge
reads /proc/PID/stat, and once the state is a zombie (or the process is gone) asks for the exit code. If
the template died, its orphaned sandboxes re-parent to the judge (a subreaper), which reaps them itself.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
from pathlib import Path

from kernelsmith.evaluate.sandboxing.process import kill_tree, sandbox_cache_env, scrubbed_env, spawn_python

# Set per sandbox, in the forked child: its scratch directory's HOME, TMPDIR and compiler caches, and
# Triton's interpreter flag (sandbox_handle.py).
PER_SANDBOX = (*sandbox_cache_env(Path()), "TRITON_INTERPRET")
START_TIMEOUT_S = 300.0


def use_template() -> bool:
    """Whether judges fork their sandboxes from a template (KERNELSMITH_SANDBOX_TEMPLATE=0: each spawned,
    as before the template existed; for comparing the two)."""
    return os.environ.get("KERNELSMITH_SANDBOX_TEMPLATE", "1") != "0"


def _state(pid: int) -> str | None:
    """The process's state letter from /proc (None: gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2 :].split()[0].decode()


class TemplateError(Exception):
    """The template is gone or broke its protocol: the caller spawns its sandbox the plain way."""


class Template:
    """One template process per judge: imports done once, a sandbox forked per request."""

    def __init__(self, device: str, cwd: Path, log_path: Path):
        self.device = device
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = scrubbed_env()
        for name in PER_SANDBOX:
            env.pop(name, None)
        # Triton reads its interpreter flag as it imports (the judge's CPU sandboxes all interpret)
        self.interpret = device == "cpu"
        if self.interpret:
            env["TRITON_INTERPRET"] = "1"
        args = ["--fd", str(theirs.fileno()), "--device", device, "--parent", str(os.getpid())]
        with open(log_path, "ab") as log:
            self.proc = spawn_python(
                "kernelsmith.evaluate.runner.template",
                args,
                env=env,
                pass_fds=[theirs.fileno()],
                cwd=cwd,
                stdout=log,  # pyright: ignore[reportArgumentType]  # spawn_python infers int; a file is fine
                stderr=log,  # pyright: ignore[reportArgumentType]  # as stdout
            )
        theirs.close()
        self.ctl = mine
        self.lock = threading.Lock()  # a deadline's timer thread may wait on a sandbox beside the judge
        self.ready = False
        self.broken = False

    def is_ready(self, wait_s: float = 0.0) -> bool:
        """Whether the template has done its imports, waiting up to `wait_s` for them (a sandbox forked
        once they are done starts sooner than one spawned beside them); False if it died."""
        if self.ready or self.broken:
            return self.ready
        with self.lock:
            try:
                if wait_s > 0:
                    self.ctl.settimeout(wait_s)
                else:
                    self.ctl.setblocking(False)
                data = self.ctl.recv(4096)
            except (BlockingIOError, TimeoutError):
                return False
            except OSError:
                data = b""
            finally:
                self.ctl.setblocking(True)
        if not data or json.loads(data).get("op") != "ready":
            self.broken = True
            return False
        self.ready = True
        return True

    def _ask(self, req: dict, fds: list[int] | None = None, timeout: float = START_TIMEOUT_S) -> dict:
        if self.broken:
            raise TemplateError("the sandbox template is gone")
        with self.lock:
            try:
                self.ctl.settimeout(timeout)
                socket.send_fds(self.ctl, [json.dumps(req).encode()], fds or [])
                data = self.ctl.recv(4096)
            except OSError as exc:
                self.broken = True
                raise TemplateError(f"the sandbox template did not answer: {exc}") from None
            finally:
                self.ctl.settimeout(None)
        if not data:
            self.broken = True
            raise TemplateError("the sandbox template is gone")
        return json.loads(data)

    def start(self, workdir: Path, env: dict[str, str], layers: list[str], uid: int | None, chan_fd: int, log_fd: int):
        """A sandbox forked from the template, in `workdir` with `env` (its per-sandbox variables)."""
        if (env.get("TRITON_INTERPRET") == "1") != self.interpret:
            raise TemplateError("the template imported triton with the other interpreter setting")
        req = {
            "op": "start",
            "workdir": str(workdir),
            "env": env,
            "unset": [] if "TRITON_INTERPRET" in env else ["TRITON_INTERPRET"],
            "device": self.device,
            "layers": layers,
            "uid": uid,
        }
        reply = self._ask(req, [chan_fd, log_fd])
        if reply.get("op") != "started":
            raise TemplateError(f"unexpected reply {reply.get('op')!r} from the sandbox template")
        return ForkedSandbox(int(reply["pid"]), self)

    def status(self, pid: int, timeout: float = 0.0) -> int | None:
        return self._ask({"op": "wait", "pid": pid, "timeout": timeout}, timeout=timeout + 30).get("code")

    def close(self) -> None:
        try:
            self.ctl.close()
        finally:
            kill_tree(self.proc)


class ForkedSandbox:
    """A sandbox forked by a Template, with the part of Popen's face the judge uses."""

    def __init__(self, pid: int, template: Template):
        self.pid = pid
        self.template = template
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and _state(self.pid) in (None, "Z", "X"):
            self.returncode = self._collect(0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"sandbox {self.pid}", timeout or 0.0)
            time.sleep(0.005)
        assert self.returncode is not None
        return self.returncode

    def _collect(self, timeout: float) -> int | None:
        try:
            return self.template.status(self.pid, timeout)
        except TemplateError:  # the template died: its orphans re-parented to us (a subreaper)
            try:
                done, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                return -9
            return os.waitstatus_to_exitcode(status) if done else None
