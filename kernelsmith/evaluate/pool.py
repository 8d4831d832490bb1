"""A pool of warm judge processes: one per visible GPU by default, or N on the CPU.

Callers depend only on `EvalBackend` (submit -> Future[EvalResult], hardware, close), so a Ray-backed
pool can replace this one without changing them.
"""

from __future__ import annotations

import os
import queue
import socket
import threading
import time
from concurrent.futures import Future
from multiprocessing.connection import Connection
from typing import Iterable, Protocol

from kernelsmith.candidate import Candidate
from kernelsmith.errors import TaskError, UserError
from kernelsmith.evaluate.baseline_cache import cache_dir
from kernelsmith.evaluate.options import EvalOptions
from kernelsmith.evaluate.process import describe_exit, kill_tree, scrubbed_env, spawn_python
from kernelsmith.evaluate.protocol import Channel
from kernelsmith.evaluate.result import EvalResult, Status
from kernelsmith.task import Task


class EvalBackend(Protocol):
    def submit(self, task: Task, candidate: Candidate | str, options: EvalOptions | None = None) -> Future: ...

    def hardware(self) -> Future: ...

    def close(self) -> None: ...


class JudgeDied(Exception):
    pass


def _nvml_device_count() -> int | None:
    """GPU count from the driver's NVML library: milliseconds, where importing torch takes seconds."""
    import ctypes

    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
        if nvml.nvmlInit_v2() != 0:
            return None
        count = ctypes.c_uint(0)
        ok = nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) == 0
        nvml.nvmlShutdown()
        return count.value if ok else None
    except (OSError, AttributeError):
        return None


def visible_gpus() -> list[str]:
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None:
        return [d.strip() for d in cvd.split(",") if d.strip()]
    count = _nvml_device_count()
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
            self.proc = spawn_python("kernelsmith.evaluate.worker",
                                     ["--fd", str(child.fileno()), "--device", device, "--parent", str(os.getpid())],
                                     env=env, pass_fds=[child.fileno()], stdout=log, stderr=log)
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


class EvalPool:
    """Evaluate candidates on warm workers. Thread-safe; `submit` returns a Future[EvalResult]."""

    # A judge may spend this long beyond the candidate's own timeout (baselines, torch.compile).
    JUDGE_GRACE = 900.0

    def __init__(self, device: str = "cuda", workers: int | None = None, options: EvalOptions | None = None,
                 gpus: list[str] | None = None):
        self.device = device
        self.options = (options or EvalOptions()).model_copy(update={"device": device})
        if device == "cuda":
            gpus = gpus if gpus is not None else visible_gpus()
            if not gpus:
                raise UserError("--device cuda: no CUDA GPU is visible here; use --device cpu")
            slots = gpu_slots(gpus, workers)
        else:
            slots = [None] * (workers or 1)
        self._queue: queue.Queue = queue.Queue()
        self._judges: dict[int, JudgeProcess] = {}  # worker index -> its current judge
        self._threads = [threading.Thread(target=self._worker, args=(i, gpu), daemon=True, name=f"ks-judge-{i}")
                         for i, gpu in enumerate(slots)]
        self._closed = False
        self._abandoned = False
        for t in self._threads:
            t.start()

    @property
    def workers(self) -> int:
        return len(self._threads)

    def submit(self, task: Task, candidate: Candidate | str, options: EvalOptions | None = None) -> Future:
        if self._closed:
            raise RuntimeError("the pool is closed")
        source = candidate.source if isinstance(candidate, Candidate) else candidate
        cand = candidate if isinstance(candidate, Candidate) else Candidate(source)
        opts = (options or self.options).model_copy(update={"device": self.device})
        req = {"op": "evaluate", "task_source": task.source, "task_hash": task.hash,
               "candidate_source": source, "candidate_hash": cand.hash, "options": opts.model_dump()}
        fut: Future = Future()
        self._queue.put((fut, req, opts))
        return fut

    def hardware(self) -> Future:
        """Future[dict]: the machine as a judge sees it (GPU name, SM count, measured ceilings)."""
        fut: Future = Future()
        self._queue.put((fut, {"op": "hardware"}, self.options))
        return fut

    def evaluate(self, task: Task, candidate: Candidate | str, options: EvalOptions | None = None) -> EvalResult:
        return self.submit(task, candidate, options).result()

    def map(self, pairs: Iterable[tuple[Task, Candidate | str]], options: EvalOptions | None = None) -> list[EvalResult]:
        futures = [self.submit(t, c, options) for t, c in pairs]
        return [f.result() for f in futures]

    def _worker(self, index: int, gpu: str | None) -> None:
        judge: JudgeProcess | None = None
        while True:
            item = self._queue.get()
            if item is None:
                break
            fut, req, opts = item
            if not fut.set_running_or_notify_cancel():
                continue
            if self._abandoned:
                fut.set_exception(RuntimeError("the evaluation pool was closed before this evaluation started"))
                continue
            reply, last_error = None, ""
            for _attempt in range(2):  # a worker lost mid-evaluation is replaced and the job retried once
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

    @staticmethod
    def _resolve(fut: Future, reply: dict | None, last_error: str, opts: EvalOptions) -> None:
        if reply is None:
            fut.set_result(EvalResult(status=Status.runtime_error, correct=False, device=opts.device,
                                      error=f"the evaluation worker died twice on this candidate: {last_error}"))
        elif reply.get("op") == "hardware":
            fut.set_result(reply["hardware"])
        elif reply.get("op") == "result":
            fut.set_result(EvalResult.model_validate(reply["result"]))
        elif reply.get("op") == "task_error":
            fut.set_exception(TaskError(reply["error"]))
        else:
            fut.set_exception(RuntimeError(f"evaluation worker failed:\n{reply.get('error', reply)}"))

    def close(self, wait: float = 30.0) -> None:
        """Stop the workers. Evaluations submitted before still run for up to `wait` seconds;
        then the rest are abandoned: running ones have their judge and sandboxes killed, and
        every abandoned future gets an error."""
        if self._closed:
            return
        self._closed = True
        for _ in self._threads:
            self._queue.put(None)
        end = time.monotonic() + wait
        for t in self._threads:
            t.join(timeout=max(0.0, end - time.monotonic()))
        self._abandoned = True
        for i, t in enumerate(self._threads):
            judge = self._judges.get(i)
            if t.is_alive() and judge is not None:
                kill_tree(judge.proc)
        for t in self._threads:
            t.join(timeout=10)

    def __enter__(self) -> "EvalPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def evaluate(task: Task, candidate: Candidate | str, options: EvalOptions | None = None) -> EvalResult:
    """Evaluate one candidate on a fresh single-worker pool (the CLI's `eval`)."""
    opts = options or EvalOptions()
    with EvalPool(device=opts.device, workers=1, options=opts) as pool:
        return pool.evaluate(task, candidate)
