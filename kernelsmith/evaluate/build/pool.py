"""The build pool: compiles candidates' extensions on the host's CPU cores, ahead of their turn on
the GPU, each build in a contained sandbox of its own, and publishes what it built in the
content-addressed cache (cache.py). An evaluation pool asks it for a candidate's builds and
queues the candidate for the GPU once they are done, so the GPU evaluates one candidate while
the next ones build. Two candidates with the same build share one.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from kernelsmith.evaluate.build.cache import BuildCache
from kernelsmith.evaluate.build.env import process_env
from kernelsmith.evaluate.build.spec import build_key
from kernelsmith.evaluate.options import EvalOptions
from kernelsmith.evaluate.sandboxing.sandbox_handle import SandboxFailure, SandboxHandle

START_LIMIT = 300.0  # seconds for a builder process to start (imports torch) on a busy host
JOBS_PER_BUILD = 2  # compiler processes per build: load_inline compiles main.cpp and cuda.cu


def default_workers() -> int:
    """Concurrent builds: one per two cores (each runs two compilers), at most 8, at least 1."""
    return max(1, min(8, (os.cpu_count() or 2) // JOBS_PER_BUILD))


@dataclass
class BuildOutcome:
    key: str
    name: str
    # cached (in the cache before it was asked for), built, compile_error (cached as such),
    # timeout, memory (over the memory limit), unavailable (the builder could not run: the
    # sandbox builds it itself)
    status: str
    seconds: float = 0.0
    error: str | None = None

    @property
    def staged(self) -> bool:
        return self.status in ("cached", "built", "compile_error")

    def to_dict(self) -> dict:
        return asdict(self)


class BuildPool:
    def __init__(self, env: dict, cache: BuildCache | None = None, workers: int | None = None):
        self.env = env
        self.cache = cache or BuildCache()
        self.workers = workers or default_workers()
        self._exec = ThreadPoolExecutor(self.workers, thread_name_prefix="ks-build")
        self._lock = threading.Lock()
        self._inflight: dict[str, Future] = {}
        self._handles: set[SandboxHandle] = set()
        self._closed = False
        self.started = 0  # builds run (a build shared by several candidates counts once)
        self._logdir = Path(tempfile.mkdtemp(prefix="ks-builds-"))
        self.cache.prune()

    def ensure(self, specs: list[dict], opts: EvalOptions) -> Future:
        """Future[list[BuildOutcome]], one per spec, once every build is in the cache or failed."""
        futures = [self._one(spec, opts) for spec in specs]
        done: Future = Future()
        left = [len(futures)]
        lock = threading.Lock()

        def one_done(_f) -> None:
            with lock:
                left[0] -= 1
                if left[0]:
                    return
            done.set_result([f.result() for f in futures])

        for f in futures:
            f.add_done_callback(one_done)
        return done

    def _one(self, spec: dict, opts: EvalOptions) -> Future:
        key = build_key(spec, self.env)
        with self._lock:
            if key in self._inflight:
                return self._inflight[key]
            fut: Future = Future()
            if self.cache.get(key) is not None:
                fut.set_result(BuildOutcome(key, spec["name"], "cached"))
                return fut
            if self._closed:
                fut.set_result(BuildOutcome(key, spec["name"], "unavailable", error="the build pool is closed"))
                return fut
            self._inflight[key] = fut

        def run() -> None:
            try:
                outcome = self._build(spec, key, opts)
            except Exception as exc:  # a bug of ours: the sandbox builds it instead
                outcome = BuildOutcome(key, spec["name"], "unavailable", error=f"{type(exc).__name__}: {exc}")
            with self._lock:
                self._inflight.pop(key, None)
            fut.set_result(outcome)

        self._exec.submit(run)
        return fut

    def _build(self, spec: dict, key: str, opts: EvalOptions) -> BuildOutcome:
        name = spec["name"]
        if self._closed:
            return BuildOutcome(key, name, "unavailable", error="the build pool is closed")
        t0 = time.monotonic()
        self.started += 1
        extra = {**process_env(self.env, JOBS_PER_BUILD), "CUDA_VISIBLE_DEVICES": ""}
        sb = SandboxHandle("cpu", self._logdir, extra_env=extra, interpret=False)
        with self._lock:
            self._handles.add(sb)
        try:
            try:
                sb.wait_ready(time.monotonic() + START_LIMIT)
                t_build = time.monotonic()
                sb.send({"op": "build", "spec": spec, "workdir": str(sb.workdir)})
                msg = sb.wait(t_build + opts.build_timeout, opts.memory_limit, "build")
            except SandboxFailure as failure:
                seconds = time.monotonic() - t0
                if failure.status == "timeout" and not self._closed:
                    error = (
                        f"building extension '{name}' took longer than the build time limit ({opts.build_timeout:g} s)"
                    )
                    return BuildOutcome(key, name, "timeout", seconds, error)
                if "memory limit" in failure.message:
                    error = f"building extension '{name}' failed: {failure.message.splitlines()[0]}"
                    return BuildOutcome(key, name, "memory", seconds, error)
                return BuildOutcome(key, name, "unavailable", seconds, failure.message[:2000])
            sb.stop()  # every builder process dead before its output is read
            seconds = time.monotonic() - t0
            if msg.get("op") != "built":
                return BuildOutcome(key, name, "unavailable", seconds, f"unexpected builder message {msg.get('op')!r}")
            if msg.get("ok"):
                try:
                    self.cache.publish_library(key, sb.workdir / str(msg["file"]), str(msg["module"]), seconds)
                except (OSError, KeyError, ValueError) as exc:
                    return BuildOutcome(key, name, "unavailable", seconds, f"the built library was unusable: {exc}")
                return BuildOutcome(key, name, "built", seconds)
            if msg.get("unsupported"):
                return BuildOutcome(key, name, "unavailable", seconds, str(msg.get("error")))
            error = str(msg.get("error") or "")
            self.cache.publish_failure(key, error, seconds)
            return BuildOutcome(key, name, "compile_error", seconds, error)
        finally:
            sb.close()
            with self._lock:
                self._handles.discard(sb)

    def close(self) -> None:
        """Stop: running builds are killed (their evaluations fall back to building in the sandbox
        or fail with the closed pool), queued ones do not start."""
        with self._lock:
            self._closed = True
            handles = list(self._handles)
        for sb in handles:
            sb.stop()
        self._exec.shutdown(wait=True, cancel_futures=False)
        for path in self._logdir.glob("*"):
            path.unlink(missing_ok=True)
        try:
            self._logdir.rmdir()
        except OSError:
            pass
