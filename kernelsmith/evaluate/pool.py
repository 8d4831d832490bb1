"""A pool of warm judge processes: one per visible GPU by default, or N on the CPU.

Callers depend only on `EvalBackend` (submit -> Future[EvalResult], hardware, close), so a Ray-backed
pool can replace this one without changing them.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import Future
from multiprocessing.connection import Connection
from typing import Protocol

from kernelsmith.candidate import Candidate
from kernelsmith.device import NO_CUDA_GPU
from kernelsmith.errors import TaskError, UserError
from kernelsmith.evaluate.build.pool import BuildOutcome, BuildPool
from kernelsmith.evaluate.build.spec import static_specs
from kernelsmith.evaluate.counters import CountersReport
from kernelsmith.evaluate.nvml import nvml_capabilities
from kernelsmith.evaluate.options import EvalOptions, cache_dir
from kernelsmith.evaluate.protocol import Channel
from kernelsmith.evaluate.queued import QueuedPool, worker_lost
from kernelsmith.evaluate.result import BuildRecord, EvalResult, StageSeconds, Status
from kernelsmith.evaluate.sandboxing import containment
from kernelsmith.evaluate.sandboxing.process import describe_exit, kill_tree, scrubbed_env, spawn_python
from kernelsmith.task import Task

ATTEMPTS = 2  # a judge lost mid-evaluation is replaced and the evaluation tried again, once
# KERNELSMITH_AHEAD=0: no candidate is loaded ahead of its turn (judging/ahead.py).
AHEAD_ENV = "KERNELSMITH_AHEAD"


class EvalBackend(Protocol):
    def submit(self, task: Task, candidate: Candidate | str, options: EvalOptions | None = None) -> Future: ...

    def hardware(self) -> Future: ...

    def profile(self, task: Task, candidate: Candidate | str, timeout: float = ...) -> Future: ...

    def close(self) -> None: ...


class JudgeDied(Exception):
    pass


def visible_gpus() -> list[str]:
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None:
        return [d.strip() for d in cvd.split(",") if d.strip()]
    caps = nvml_capabilities()
    count = len(caps) if caps is not None else None
    if count is None:
        import torch

        count = torch.cuda.device_count()
    return [str(i) for i in range(count)]


def gpu_slots(gpus: list[str], workers: int | None) -> list[str]:
    """The GPU of each worker: one worker per GPU by default; more workers than GPUs share them
    round-robin. Each worker's judge sees only its GPU (CUDA_VISIBLE_DEVICES), so it sticks to it."""
    return [gpus[i % len(gpus)] for i in range(workers or len(gpus))]


class JudgeProcess:
    START_TIMEOUT = 600.0

    def __init__(self, device: str, gpu: str | None):
        parent, child = socket.socketpair()
        logdir = cache_dir() / "logs"
        logdir.mkdir(exist_ok=True)
        self.log_path = logdir / f"judge-{os.getpid()}-{time.monotonic_ns()}.log"
        env = scrubbed_env({"CUDA_VISIBLE_DEVICES": gpu} if gpu is not None else None)
        env.pop("TRITON_INTERPRET", None)  # the judge runs only PyTorch code
        with open(self.log_path, "wb") as log:
            self.proc = spawn_python(
                "kernelsmith.evaluate.judging.worker",
                ["--fd", str(child.fileno()), "--device", device, "--parent", str(os.getpid())],
                env=env,
                pass_fds=[child.fileno()],
                stdout=log,  # pyright: ignore[reportArgumentType]  # spawn_python infers int; a file is fine
                stderr=log,  # pyright: ignore[reportArgumentType]  # as stdout
            )
        child.close()
        self.chan = Channel(Connection(os.dup(parent.fileno())))
        parent.close()
        hello = self._wait(self.START_TIMEOUT, "start-up")
        self.gpu_name = hello.get("gpu_name")

    def log_tail(self, n: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:].strip()
        except OSError:
            return ""

    def _wait(self, timeout: float, what: str) -> dict:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.chan.poll(0.1):
                try:
                    return self.chan.recv()
                except (EOFError, ConnectionError, OSError):
                    break
            if self.proc.poll() is not None:
                break
        raise JudgeDied(f"evaluation worker {describe_exit(self.proc.poll())} during {what}\n{self.log_tail()}")

    def request(self, req: dict, timeout: float) -> dict:
        try:
            self.chan.send(req)
        except OSError as exc:
            raise JudgeDied(f"evaluation worker unreachable: {exc}") from None
        return self._wait(timeout, "an evaluation")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        try:
            self.chan.send({"op": "exit"})
            self.proc.wait(timeout=5)
        except Exception:
            pass
        kill_tree(self.proc)
        self.chan.close()
        try:
            self.log_path.unlink()
        except OSError:
            pass


class EvalPool(QueuedPool):
    """Evaluate candidates on warm workers. Thread-safe; `submit` returns a Future[EvalResult]."""

    # A judge may spend this long beyond the candidate's own timeout (baselines, torch.compile).
    JUDGE_GRACE = 900.0

    def __init__(
        self,
        device: str = "cuda",
        workers: int | None = None,
        options: EvalOptions | None = None,
        gpus: list[str] | None = None,
        build_workers: int | None = None,
    ):
        """`build_workers`: concurrent CUDA C++ builds ahead of the GPU (default: one per two
        CPU cores, at most 8; build/pool.py)."""
        self.device = device
        self.build_workers = build_workers
        self._builds: BuildPool | None = None  # started by the first candidate that builds
        self._builds_lock = threading.Lock()
        self.options = (options or EvalOptions()).model_copy(update={"device": device})
        containment.check_strict(device)  # one clear line before any process starts
        if device == "cuda":
            gpus = gpus if gpus is not None else visible_gpus()
            if not gpus:
                raise UserError(NO_CUDA_GPU)
            self._slots: Sequence[str | None] = gpu_slots(gpus, workers)
        else:
            self._slots = [None] * (workers or 1)
        self._judges: dict[int, JudgeProcess] = {}  # worker index -> its current judge
        self._start(len(self._slots), "ks-judge")

    def _evaluate_call(self, task: Task, source: str, opts: EvalOptions) -> dict:
        return {
            "op": "evaluate",
            "task_source": task.source,
            "task_hash": task.hash,
            "candidate_source": source,
            "candidate_hash": Candidate(source).hash,
            "options": opts.model_dump(),
        }

    def _hardware_call(self) -> dict:
        return {"op": "hardware"}

    def _profile_call(self, task: Task, source: str, timeout: float) -> dict:
        return {"op": "profile", "task_source": task.source, "candidate_source": source, "timeout": timeout}

    def submit(self, task: Task, candidate: Candidate | str, options: EvalOptions | None = None) -> Future:
        """Queue the candidate for a judge; one with `load_inline` builds queues once its builds are
        done (the build pool runs them on the CPU meanwhile, while the GPU evaluates others)."""
        source = candidate.source if isinstance(candidate, Candidate) else candidate
        specs = static_specs(source) if "load_inline" in source else []
        if not specs or self._closed or self.build_workers == 0:
            return super().submit(task, source, options)
        opts = (options or self.options).model_copy(update={"device": self.device})
        builds = self._build_pool()
        fut: Future = Future()
        t0 = time.monotonic()

        def built(done: Future) -> None:
            outcomes: list[BuildOutcome] = done.result()
            wait = time.monotonic() - t0
            failed = next((o for o in outcomes if o.status in ("timeout", "memory")), None)
            if failed is not None:  # no verdict can follow a build that did not finish
                if fut.set_running_or_notify_cancel():
                    fut.set_result(self._build_failure(task, source, opts, outcomes, failed, wait))
                return
            call = self._evaluate_call(task, source, opts)
            call["build"] = {
                "env": builds.env,
                "root": str(builds.cache.root),
                "keys": [o.key for o in outcomes if o.staged],
                "sources": {o.key: "pool" if o.status in ("built", "compile_error") else "cache" for o in outcomes},
                "wait": wait,
            }
            try:
                self._put(call, opts, fut)
            except RuntimeError as exc:
                if fut.set_running_or_notify_cancel():
                    fut.set_exception(exc)

        builds.ensure(specs, opts).add_done_callback(built)
        return fut

    def _build_pool(self) -> BuildPool:
        with self._builds_lock:
            if self._builds is None:
                from kernelsmith.evaluate.build.env import build_env

                self._builds = BuildPool(build_env(self.device), workers=self.build_workers)
            return self._builds

    def _build_failure(
        self,
        task: Task,
        source: str,
        opts: EvalOptions,
        outcomes: list[BuildOutcome],
        failed: BuildOutcome,
        wait: float,
    ) -> EvalResult:
        """The verdict of a candidate whose build ran out of time (timeout) or memory (compile_error)."""
        return EvalResult(
            status=Status.timeout if failed.status == "timeout" else Status.compile_error,
            correct=False,
            error=failed.error,
            device=opts.device,
            task_hash=task.hash,
            candidate_hash=Candidate(source).hash,
            torch_ops=opts.torch_ops,
            builds=[
                BuildRecord(
                    name=o.name, source="pool", ok=o.status in ("built", "cached"), seconds=o.seconds, key=o.key
                )
                for o in outcomes
            ],
            stages=StageSeconds(build=wait, total=wait),
        )

    def _after_close(self) -> None:
        if self._builds is not None:
            self._builds.close()

    def map(
        self, pairs: Iterable[tuple[Task, Candidate | str]], options: EvalOptions | None = None
    ) -> list[EvalResult]:
        futures = [self.submit(t, c, options) for t, c in pairs]
        return [f.result() for f in futures]

    def _serve_slot(self, index: int) -> None:
        gpu = self._slots[index]
        judge: JudgeProcess | None = None
        while (item := self._next()) is not None:
            fut, req, opts = item
            req = self._with_next(req)
            reply, last_error = None, ""
            for _attempt in range(ATTEMPTS):
                try:
                    if judge is None or not judge.alive():
                        if judge is not None:
                            judge.close()
                        judge = JudgeProcess(self.device, gpu)
                        self._judges[index] = judge
                    reply = judge.request(req, opts.timeout + self.JUDGE_GRACE)
                    break
                except Exception as exc:  # JudgeDied, or a broken reply: replace the worker
                    last_error = str(exc)
                    if judge is not None:
                        judge.close()
                    judge = None
                    if self._abandoned:  # killed by close(): no retry
                        break
            if reply is None and self._abandoned:
                fut.set_exception(RuntimeError("the evaluation pool was closed during this evaluation"))
                continue
            try:
                self._resolve(fut, reply, last_error, opts)
            except Exception as exc:  # never leave a future hanging
                fut.set_exception(exc)
        if judge is not None:
            judge.close()
        self._judges.pop(index, None)

    def _with_next(self, req: dict) -> dict:
        """An evaluation with the queue's next one beside it (`after`): its judge loads that one ahead,
        on the host's cores, while it judges this one (judging/ahead.py)."""
        if req.get("op") != "evaluate" or os.environ.get(AHEAD_ENV, "1") == "0":
            return req
        with self._queue.mutex:  # a look at the head, under the queue's own lock; nothing is taken
            head = self._queue.queue[0] if self._queue.queue else None
        nxt = head[1] if head is not None else None
        if not isinstance(nxt, dict) or nxt.get("op") != "evaluate" or nxt.get("task_hash") != req.get("task_hash"):
            return req
        return {**req, "after": nxt}

    @staticmethod
    def _resolve(fut: Future, reply: dict | None, last_error: str, opts: EvalOptions) -> None:
        if reply is None:
            fut.set_result(worker_lost(opts.device, ATTEMPTS, last_error))
        elif reply.get("op") == "hardware":
            fut.set_result(reply["hardware"])
        elif reply.get("op") == "profile":
            fut.set_result(CountersReport.model_validate(reply["profile"]))
        elif reply.get("op") == "result":
            fut.set_result(EvalResult.model_validate(reply["result"]))
        elif reply.get("op") == "task_error":
            fut.set_exception(TaskError(reply["error"]))
        elif reply.get("op") == "setup_error":
            fut.set_exception(UserError(reply["error"]))
        else:
            fut.set_exception(RuntimeError(f"evaluation worker failed:\n{reply.get('error', reply)}"))

    def _abandon_running(self) -> None:
        for i, t in enumerate(self._threads):
            judge = self._judges.get(i)
            if t.is_alive() and judge is not None:
                kill_tree(judge.proc)


def evaluate(
    task: Task, candidate: Candidate | str, options: EvalOptions | None = None, profile_timeout: float | None = None
) -> EvalResult:
    """Evaluate one candidate on a fresh single-worker pool (the CLI's `eval`); with
    `profile_timeout`, a successful one then gets its counters stage (Nsight Compute)."""
    opts = options or EvalOptions()
    with EvalPool(device=opts.device, workers=1, options=opts) as pool:
        result = pool.evaluate(task, candidate)
        if profile_timeout is not None and result.success:
            result.counters = pool.profile(task, candidate, profile_timeout).result()
        return result
