"""A sandbox template: a process that has imported what every sandbox imports (torch, triton, the
sandbox's own modules) and forks a sandbox from itself on the judge's request, so a sandbox starts in
milliseconds instead of paying the imports (~2-4 s) each time.

It is started by a judge (kernelsmith.evaluate.sandboxing.template_handle) with a sandbox's scrubbed
environment, never runs candidate code and touches no GPU: CUDA is made in each forked sandbox, after
the fork, as in a spawned one. The fork leaves the child one thread, so Landlock binds all of it as
in sandbox_start; every other layer is applied by the same code afterwards. The child starts a session
of its own, closes every descriptor but the judge's channel (the template's control socket included),
takes its scratch directory, its own HOME, TMPDIR and compiler caches, and then is a sandbox.

The template keeps its children as zombies until the judge asks for their status ("wait"), so a
sandbox's pid is never reused while its judge may still signal it.

    python -m kernelsmith.evaluate.runner.template --fd N --device cpu|cuda [--parent PID]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import time

MAX_MESSAGE = 65536
WAIT_STEP_S = 0.005


def _child(req: dict, fds: list[int], ctl: socket.socket) -> None:
    """In the forked child: become the sandbox `req` describes. Never returns."""
    chan_fd, log_fd = fds
    try:
        ctl.close()  # the template's control socket: no sandbox may ask for forks or statuses
        os.setsid()  # its own session and group: the judge kills the group
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        os.closerange(3, chan_fd)
        os.closerange(chan_fd + 1, os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 65536)
        os.chdir(req["workdir"])
        for name in req.get("unset", []):
            os.environ.pop(name, None)
        os.environ.update(req["env"])
        tempfile.tempdir = None  # TMPDIR is read again: the template's may have been cached
        from kernelsmith.evaluate.runner.sandbox_start import start

        start(chan_fd, req["device"], list(req["layers"]), req.get("uid"))
    except BaseException as exc:  # noqa: BLE001 - said in the sandbox's log; the judge sees the exit
        print(f"sandbox template child: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        os._exit(70)
    os._exit(0)


def _wait(pid: int, timeout: float) -> int | None:
    """The exit code of child `pid` (negative: killed by that signal), None if it runs past `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return -9  # collected before, or never ours: it is gone
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() >= deadline:
            return None
        time.sleep(WAIT_STEP_S)


def serve(ctl: socket.socket) -> None:
    """Answer the judge's requests until it closes the control socket."""
    ctl.send(json.dumps({"op": "ready", "pid": os.getpid()}).encode())
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(ctl, MAX_MESSAGE, 2)
        except OSError:
            return
        if not data:
            return
        req = json.loads(data)
        if req.get("op") == "start":
            pid = os.fork()
            if pid == 0:
                _child(req, fds, ctl)
            for fd in fds:
                os.close(fd)
            reply: dict = {"op": "started", "pid": pid}
        elif req.get("op") == "wait":
            reply = {"op": "status", "pid": req["pid"], "code": _wait(int(req["pid"]), float(req.get("timeout", 0)))}
        else:
            return
        ctl.send(json.dumps(reply).encode())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fd", type=int, required=True)
    ap.add_argument("--device", choices=["cpu", "cuda"], required=True)
    ap.add_argument("--parent", type=int, default=None, help="pid of the judge: die with it")
    args = ap.parse_args()
    from kernelsmith.evaluate.sandboxing.process import die_with_parent

    if args.parent is not None:
        die_with_parent(args.parent)
    # What every sandbox imports, once: the modules a sandbox_start loads before any candidate code.
    from kernelsmith.evaluate.runner import sandbox  # noqa: F401  (torch, triton)

    if args.device == "cuda":
        import torch

        assert not torch.cuda.is_initialized(), "a template must not touch CUDA: forks could not use it"
    serve(socket.socket(fileno=args.fd))
    os._exit(0)


if __name__ == "__main__":
    main()
