"""The judge's handle on one sandbox process: start it warm, talk to it, watch it, kill it."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path

from kernelsmith.evaluate.protocol import Channel, ProtocolError
from kernelsmith.evaluate.sandboxing import containment, isolation
from kernelsmith.evaluate.sandboxing.process import (
    describe_exit,
    kill_tree,
    kill_uid,
    sandbox_cache_env,
    scrubbed_env,
    spawn_python,
    tree_rss,
)
from kernelsmith.evaluate.sandboxing.template_handle import (
    PER_SANDBOX,
    START_TIMEOUT_S,
    ForkedSandbox,
    Template,
    TemplateError,
)


class SandboxFailure(Exception):
    """The sandbox died, hung, blew its memory limit or broke the protocol: a verdict, not a bug."""

    def __init__(self, status: str, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def _forked(
    template: Template, workdir: Path, env: dict[str, str], layers: list[str], uid: int | None, chan: int, log: int
) -> ForkedSandbox | None:
    """A sandbox forked from `template` with the variables that differ from the template's own (its
    scratch directory's, Triton's interpreter flag); None when the template cannot fork it."""
    own = {k: v for k, v in env.items() if k in PER_SANDBOX}
    try:
        return template.start(workdir, own, layers, uid, chan, log)
    except TemplateError:
        return None


class SandboxHandle:
    LOG_TAIL = 3000

    def __init__(
        self,
        device: str,
        logdir: Path,
        extra_env: dict[str, str] | None = None,
        interpret: bool = True,
        hold_warm_up: bool = False,
        template: Template | None = None,
    ):
        """`extra_env`: variables for this sandbox (a builder's compiler settings). `interpret`:
        on the CPU, run Triton kernels in Triton's interpreter (a builder runs none).

        A sandbox starts in two steps: it imports torch and triton (host work), then, on the word
        `warm()`, warms up (the CUDA context, the profiler's first window, the spin clock: work on the
        GPU) and says it is ready. `hold_warm_up`: the word waits for `warm()` (a judge's spare, so
        that its GPU warm-up never runs beside a timed call); else it is given at once. `template`: a
        ready template forks it with its imports done (template_handle.py); bubblewrap's sandboxes are
        spawned, as are all once the template is gone; one asked for while the template still imports
        waits for it (its imports are the ones a spawned sandbox would make)."""
        self.device = device
        parent, child = socket.socketpair()
        self.workdir = Path(tempfile.mkdtemp(prefix="ks-cand-"))
        self.log_path = logdir / f"sandbox-{os.getpid()}-{time.monotonic_ns()}.log"
        # A private HOME and TMPDIR, and every compiler cache inside them, so no candidate reads
        # (or poisons) another's compiled kernels. Named explicitly: the judge's torch.compile
        # baseline sets TRITON_CACHE_DIR to /tmp/torchinductor_<user>/triton in the judge's
        # environment, which sandboxes started later would inherit (Landlock then denied the
        # candidate's own Triton build there: runtime_error on the H200, 2026-12-03).
        env = scrubbed_env({**(extra_env or {}), **sandbox_cache_env(self.workdir)})
        env.pop("TRITON_INTERPRET", None)
        if device == "cpu" and interpret:
            env["TRITON_INTERPRET"] = "1"
        self.plan = containment.plan(device)
        self.uid = containment.new_uid() if "uid" in self.plan.on else None
        layers = [name for name in self.plan.on if name != "bwrap"]
        args = ["--fd", str(child.fileno()), "--device", device, "--layers", ",".join(layers)]
        args += ["--uid", str(self.uid)] if self.uid is not None else []
        wrapper = (
            isolation.wrapper(
                self.workdir, device, keep_setuid=self.uid is not None, keep_mount="procmask" in self.plan.on
            )
            if "bwrap" in self.plan.on
            else []
        )
        with open(self.log_path, "wb") as log:
            self.proc = (
                _forked(template, self.workdir, env, layers, self.uid, child.fileno(), log.fileno())
                if template is not None and not wrapper and template.is_ready(START_TIMEOUT_S)
                else None
            ) or spawn_python(
                "kernelsmith.evaluate.runner.sandbox_start",
                args,
                env=env,
                pass_fds=[child.fileno()],
                cwd=self.workdir,
                stdout=log,  # pyright: ignore[reportArgumentType]  # spawn_python infers int; a file is fine
                stderr=log,  # pyright: ignore[reportArgumentType]  # as stdout
                wrapper=wrapper,
            )
        self.forked = isinstance(self.proc, ForkedSandbox)
        child.close()
        self.chan = Channel(Connection(os.dup(parent.fileno())))
        parent.close()
        self.ready = False
        self.word_given = False  # the word to warm up (see __init__)
        self.info: dict = {}  # what the sandbox measured before any candidate code ran (ready message)
        self.timed_out = False
        self._message = None
        # On CUDA tensors travel as IPC handles, so honest messages are small; on the CPU they
        # carry the data.
        self.max_message = 64 * 2**20 if device == "cuda" else 2**31
        if not hold_warm_up:
            self.warm()

    def log_tail(self) -> str:
        try:
            with open(self.log_path, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                fh.seek(max(0, fh.tell() - self.LOG_TAIL))
                return fh.read().decode("utf-8", "replace").strip()
        except OSError:
            return ""

    def wait(self, deadline: float, memory_limit: int, stage: str):
        """Next message, or SandboxFailure on death, timeout, memory limit or a bad message."""
        last_rss_check = 0.0
        while True:
            if self.chan.poll(0.02):
                self._receive(deadline, stage)
                if self._message is not None:
                    msg, self._message = self._message, None
                    return msg
            now = time.monotonic()
            if self.timed_out:
                raise SandboxFailure("timeout", f"a message was still incomplete during {stage} at the time limit")
            if self.proc.poll() is not None:
                tail = self.log_tail()
                msg = f"candidate process {describe_exit(self.proc.returncode)} during {stage}"
                raise SandboxFailure("runtime_error", msg + (f"\n{tail}" if tail else ""))
            if now > deadline:
                raise SandboxFailure("timeout", f"no answer during {stage} before the time limit")
            if now - last_rss_check > 0.05:
                last_rss_check = now
                rss = tree_rss(self.proc.pid)
                if rss > memory_limit:
                    raise SandboxFailure(
                        "runtime_error",
                        f"candidate exceeded the memory limit during {stage}: "
                        f"{rss / 2**30:.2f} GiB resident > {memory_limit / 2**30:.2f} GiB",
                    )

    def _receive(self, deadline: float, stage: str) -> None:
        """Read one message. A frame can announce more bytes than ever come, so the read is
        bounded by the deadline (a timer kills the sandbox) and by a size limit."""
        timer = threading.Timer(max(0.0, deadline - time.monotonic()), self._kill_at_deadline)
        timer.start()
        try:
            self._message = self.chan.recv(self.max_message)
        except (EOFError, ConnectionError):
            pass  # it died or was killed: the caller reports why
        except OSError as exc:  # "bad message length": larger than any honest message
            raise SandboxFailure(
                "runtime_error", f"{stage}: unreadable message from the candidate process ({exc})"
            ) from None
        except ProtocolError as exc:
            raise SandboxFailure("runtime_error", f"{stage}: {exc}") from None
        finally:
            timer.cancel()

    def _kill_at_deadline(self) -> None:
        self.timed_out = True
        kill_tree(self.proc)

    def warm(self) -> None:
        """Give the word to warm up (queued: the sandbox reads it once its imports are done)."""
        if not self.word_given:
            self.word_given = True
            self.send({"op": "warm"})

    @property
    def warming(self) -> bool:
        """Told to warm up and not ready yet: its GPU warm-up may be running now."""
        return self.word_given and not self.ready

    def wait_ready(self, deadline: float) -> None:
        """Until the sandbox is ready (the word to warm up given now, if it was not)."""
        if self.ready:
            return
        self.warm()
        while True:
            msg = self.wait(deadline, 2**62, "start-up")
            if msg.get("op") != "imported":
                break
        if msg.get("op") != "ready":
            raise SandboxFailure("runtime_error", f"sandbox start-up: unexpected message {msg.get('op')!r}")
        self.info = msg
        self.ready = True

    def containment(self) -> containment.Plan:
        """The plan as the sandbox applied it: a layer it reported failing is off."""
        applied = containment.Plan(
            device=self.plan.device, mode=self.plan.mode, off=dict(self.plan.off), landlock_abi=self.plan.landlock_abi
        )
        outcomes = self.info.get("containment") or {}
        for name, what in self.plan.on.items():
            outcome = str(outcomes.get(name, "on" if name == "bwrap" else "not reported by the sandbox"))
            if outcome.startswith("on"):
                applied.on[name] = what
            else:
                applied.off[name] = outcome
        return applied

    def send(self, msg: dict) -> None:
        try:
            self.chan.send(msg)
        except (BrokenPipeError, ConnectionError, OSError):
            pass  # noticed by the next wait()

    def stop(self) -> None:
        """Kill it and everything it started; its scratch space stays (for a builder's output)."""
        kill_tree(self.proc)
        if self.uid is not None:  # anything still running under the sandbox's own uid is its doing
            kill_uid(self.uid)

    def close(self) -> None:
        """Kill it and everything it started; remove its scratch space and log."""
        self.stop()
        self.chan.close()
        shutil.rmtree(self.workdir, ignore_errors=True)
        try:
            self.log_path.unlink()
        except OSError:
            pass
