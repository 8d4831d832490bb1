"""The evaluation pool on Ray: one actor per GPU (`num_gpus=1`), or N CPU actors, on a local or
remote Ray cluster. Same `EvalBackend` as `EvalPool`.

Each actor runs an ordinary one-worker `EvalPool` (judge process, sandboxes, every integrity
check) on the GPU Ray gave it: Ray sets CUDA_VISIBLE_DEVICES in the actor, and the judge inherits
it, so a worker sticks to its GPU. The driver keeps one dispatcher thread per actor. An actor or a
node that is lost mid-evaluation is replaced and the evaluation retried (up to `attempts` times),
so a lost worker costs time, never a verdict.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from concurrent.futures import Future

from kernelsmith.errors import TaskError, UserError
from kernelsmith.evaluate.counters import CountersReport
from kernelsmith.evaluate.options import EvalOptions
from kernelsmith.evaluate.queued import QueuedPool, worker_lost
from kernelsmith.evaluate.result import EvalResult
from kernelsmith.task import Task

log = logging.getLogger(__name__)


class EvalActor:
    """Lives in a Ray worker process: one warm `EvalPool` worker on this actor's device."""

    def __init__(self, device: str, options: dict):
        from kernelsmith.evaluate.pool import EvalPool

        self.device = device
        self.pool = EvalPool(device=device, workers=1, options=EvalOptions.model_validate(options))

    def where(self) -> dict:
        """Where this actor runs: for logs, and for tests that check GPU stickiness."""
        return {
            "node": socket.gethostname(),
            "pid": os.getpid(),
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        }

    def evaluate(self, task_source: str, task_name: str, candidate_source: str, options: dict) -> dict:
        task = Task(source=task_source, name=task_name)
        try:
            result = self.pool.evaluate(task, candidate_source, EvalOptions.model_validate(options))
        except TaskError as exc:
            return {"task_error": str(exc)}
        return {"result": result.model_dump(mode="json")}

    def hardware(self) -> dict:
        return self.pool.hardware().result()

    def profile(self, task_source: str, task_name: str, candidate_source: str, timeout: float) -> dict:
        report = self.pool.profile(Task(source=task_source, name=task_name), candidate_source, timeout).result()
        return report.model_dump(mode="json")

    def shutdown(self) -> None:
        self.pool.close()


class RayPool(QueuedPool):
    CLOSE_WAIT = 60.0
    START_TIMEOUT = 600.0  # an actor's start (placement, imports) before its first evaluation
    JUDGE_GRACE = 900.0  # as EvalPool: baselines and torch.compile beyond the candidate's timeout

    def __init__(
        self,
        device: str = "cuda",
        workers: int | None = None,
        options: EvalOptions | None = None,
        address: str | None = None,
        attempts: int = 3,
    ):
        try:
            import ray
        except ImportError:
            raise UserError("the Ray backend needs Ray: pip install 'kernelsmith[ray]'") from None
        self._ray = ray
        self.device = device
        self.options = (options or EvalOptions()).model_copy(update={"device": device})
        self.attempts = attempts
        self._own_ray = not ray.is_initialized()
        if self._own_ray:
            try:
                ray.init(
                    address=address,
                    include_dashboard=False,
                    log_to_driver=False,
                    logging_level=logging.ERROR,
                    namespace="kernelsmith",
                )
            except (ConnectionError, ValueError, RuntimeError) as exc:
                raise UserError(
                    f"cannot join the Ray cluster at {address or 'a new local instance'}: "
                    f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
                ) from None
        resources = ray.cluster_resources()
        if device == "cuda":
            gpus = int(resources.get("GPU", 0))
            if gpus == 0:
                self._shutdown_ray()
                raise UserError("--device cuda: the Ray cluster has no GPU; use --device cpu")
            if workers is not None and workers > gpus:
                self._shutdown_ray()
                raise UserError(
                    f"--workers {workers}: the Ray cluster has {gpus} GPU{'s' if gpus != 1 else ''}, "
                    "and each worker takes one"
                )
            n = workers or gpus
            self._actor_options = {"num_gpus": 1, "num_cpus": 1}
        else:
            n = workers or 1
            self._actor_options = {"num_cpus": 1}
        self._actor_class = ray.remote(EvalActor).options(max_restarts=0, max_concurrency=2, **self._actor_options)
        # Started now, so that they warm up (placement, imports) while the caller gets ready.
        self._actors: list = [self._new_actor() for _ in range(n)]
        self._lock = threading.Lock()
        self.restarts = 0  # actors replaced after a loss, over the pool's life
        self._start(n, "ks-ray")

    def _evaluate_call(self, task: Task, source: str, opts: EvalOptions) -> tuple:
        return ("evaluate", task.source, task.name, source, opts.model_dump(mode="json"))

    def _hardware_call(self) -> tuple:
        return ("hardware",)

    def _profile_call(self, task: Task, source: str, timeout: float) -> tuple:
        return ("profile", task.source, task.name, source, timeout)

    def actors(self) -> list:
        """The live actor handles (None where one is being replaced)."""
        with self._lock:
            return list(self._actors)

    def _abandon_running(self) -> None:
        """Every actor goes, idle or not; a dispatch thread whose actor is killed does not replace it."""
        for i, actor in enumerate(self._actors):
            if actor is not None:
                try:
                    self._ray.get(actor.shutdown.remote(), timeout=30)
                except Exception:
                    pass
                self._ray.kill(actor, no_restart=True)
                self._actors[i] = None

    def _after_close(self) -> None:
        self._shutdown_ray()

    # -- dispatch ------------------------------------------------------------------------------
    def _shutdown_ray(self) -> None:
        if self._own_ray and self._ray.is_initialized():
            self._ray.shutdown()

    def _new_actor(self):
        return self._actor_class.remote(self.device, self.options.model_dump(mode="json"))

    def _actor(self, slot: int):
        with self._lock:
            actor = self._actors[slot]
            if actor is None:
                actor = self._new_actor()
                self._actors[slot] = actor
            return actor

    def _drop(self, slot: int, actor) -> None:
        with self._lock:
            if self._actors[slot] is actor:
                self._actors[slot] = None
                self.restarts += 1
        try:
            self._ray.kill(actor, no_restart=True)
        except Exception:
            pass

    def _serve_slot(self, slot: int) -> None:
        from ray.exceptions import GetTimeoutError, RayError, RayTaskError

        while (item := self._next()) is not None:
            fut, call, opts = item
            reply, last_error = None, ""
            for _attempt in range(self.attempts):
                actor = self._actor(slot)
                try:
                    if call[0] == "hardware":
                        reply = ("hardware", self._ray.get(actor.hardware.remote(), timeout=self.START_TIMEOUT))
                    elif call[0] == "profile":
                        ref = actor.profile.remote(*call[1:])
                        limit = self.START_TIMEOUT + opts.timeout + self.JUDGE_GRACE
                        reply = ("profile", self._ray.get(ref, timeout=limit))
                    else:
                        ref = actor.evaluate.remote(*call[1:])
                        reply = (
                            "evaluate",
                            self._ray.get(ref, timeout=self.START_TIMEOUT + opts.timeout + self.JUDGE_GRACE),
                        )
                    break
                except RayTaskError as exc:  # our own code raised inside the actor: a bug, not a loss
                    reply = ("error", exc)
                    break
                except (GetTimeoutError, RayError) as exc:  # actor or node lost, or hung: replace and retry
                    last_error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                    if self._closed:  # close() killed it: no replacement
                        break
                    log.warning("Ray evaluation worker %d lost (%s); replacing it and retrying", slot, last_error)
                    self._drop(slot, actor)
            if reply is None and self._closed:
                fut.set_exception(RuntimeError("the evaluation pool was closed during this evaluation"))
                continue
            self._resolve(fut, reply, last_error, opts)

    def _resolve(self, fut: Future, reply, last_error: str, opts: EvalOptions) -> None:
        if reply is None:
            fut.set_result(worker_lost(opts.device, self.attempts, last_error))
        elif reply[0] == "error":
            fut.set_exception(RuntimeError(f"Ray evaluation actor failed:\n{reply[1]}"))
        elif reply[0] == "hardware":
            fut.set_result(reply[1])
        elif reply[0] == "profile":
            fut.set_result(CountersReport.model_validate(reply[1]))
        elif "task_error" in reply[1]:
            fut.set_exception(TaskError(reply[1]["task_error"]))
        else:
            fut.set_result(EvalResult.model_validate(reply[1]["result"]))
