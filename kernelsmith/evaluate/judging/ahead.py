"""A candidate loaded ahead of its turn: the host's cores work while the GPU judges another (issue 56).

When the pool's queue holds the next candidate of the same task, the judge hands it to a ready spare
sandbox once the current evaluation's baselines are done: the spare imports the candidate, builds
ModelNew and runs one forward on inputs of its own (Triton's JIT compiles there, ~1.2 s a candidate on
an H100), beside the current candidate's correctness trials, which nothing times. Before anything is
timed (`Judge.settle`) the judge waits a bounded while for its answer, then stops the sandbox's whole
process tree (SIGSTOP) until its turn; one still loading then is killed, and its candidate is judged
from the start in its turn. In its turn the evaluation takes that sandbox, resumes it and reads the
load's answer as it would have in its turn: the trials, the timing and the verdict are unchanged, and
so is the seed its weights were drawn from (kept here, the reference built from it). A candidate that
does not come next (another came, the search stopped) has its sandbox killed unused.

What it leaves open, bounded: the sandbox's memory is checked when the judge looks at it (in settle and
in its turn), not every 50 ms; a candidate's own threads could launch GPU work after its load answered
and before it was stopped (its own turn's checks are the usual ones). Candidates that build CUDA C++
(`load_inline`) are never loaded ahead: their builds are the build pool's (build/). KERNELSMITH_AHEAD=0
turns it off (the pool, kernelsmith.evaluate.pool, then sends no next candidate).
"""

from __future__ import annotations

import threading
import time

from kernelsmith.candidate import analyze
from kernelsmith.evaluate.sandboxing.process import pause_tree, resume_tree, tree_rss
from kernelsmith.evaluate.sandboxing.sandbox_handle import SandboxFailure, SandboxHandle

# Seconds the judge waits, before a timed stage, for the sandbox loading ahead to answer; then it is killed.
SETTLE_S = 20.0
# A task whose inputs and outputs are larger is never loaded ahead: two candidates' copies of them on
# the GPU at once (a paused one holds its memory) could leave the judged one short of memory.
MAX_TASK_BYTES = 2 * 2**30


def eligible(req: dict | None, task_hash: str) -> bool:
    """A next candidate worth loading ahead: of the same task, no builds, a ModelNew that parses."""
    if not req or req.get("task_hash") != task_hash or req.get("build") is not None:
        return False
    source = str(req.get("candidate_source", ""))
    if "load_inline" in source:
        return False
    facts = analyze(source)
    return not facts.syntax_error and facts.has_model_new


def job(sb: SandboxHandle, task_source: str, candidate_source: str, seed_init: int, build: dict | None) -> dict:
    """The sandbox's job: load the candidate, build ModelNew from `seed_init` (the reference's weights are
    drawn from it too)."""
    return {
        "op": "job",
        "workdir": str(sb.workdir),
        "task_source": task_source,
        "candidate_source": candidate_source,
        "seed_init": seed_init,
        "build": build,
    }


class Ahead:
    """A spare sandbox loading (or loaded with) the next candidate. A thread of the judge waits for the spare
    to be ready (its containment checked as in a turn) and sends the job, so that the evaluation that
    hands it on never waits for a spare's start; the thread touches this sandbox alone."""

    def __init__(self, sb: SandboxHandle, req: dict, seed_init: int, memory_limit: int, warm_seed: int):
        self.sb, self.seed_init, self.memory_limit = sb, seed_init, memory_limit
        self.task_hash, self.candidate_hash = str(req["task_hash"]), str(req["candidate_hash"])
        self.started = time.monotonic()
        self.answered: float | None = None  # when its load's answer was there (monotonic)
        self.paused = False
        self.failed = False  # not ready, or not contained as strict mode asks: its turn starts afresh
        job_msg = {**job(sb, req["task_source"], req["candidate_source"], seed_init, None), "warm_seed": warm_seed}
        self._thread = threading.Thread(target=self._send, args=(job_msg,), daemon=True, name="ks-ahead")
        self._thread.start()

    def _send(self, job_msg: dict) -> None:
        try:
            self.sb.wait_ready(self.started + SETTLE_S)
            if self.sb.containment().strict_unmet():
                raise SandboxFailure("runtime_error", "not contained")  # its turn says why, from its own sandbox
        except Exception:
            self.failed = True
            return
        self.sb.send(job_msg)

    def matches(self, task_hash: str, candidate_hash: str) -> bool:
        return (self.task_hash, self.candidate_hash) == (task_hash, candidate_hash)

    def _started(self) -> bool:
        """The job sent (the starter thread joined); False: it never will be."""
        self._thread.join(max(0.0, self.started + SETTLE_S - time.monotonic()))
        return not self._thread.is_alive() and not self.failed and self.sb.proc.poll() is None

    def settle(self) -> bool:
        """Wait (until SETTLE_S after its start at most) for its load's answer, then stop it; False: it was
        killed (still starting or loading, over its memory limit, or dead)."""
        if self.paused:
            return True
        end = self.started + SETTLE_S
        try:
            if not self._started():
                raise SandboxFailure("runtime_error", "not started in time")
            while self.answered is None:
                if self.sb.chan.poll(0.02):
                    self.answered = time.monotonic()
                    break
                if self.sb.proc.poll() is not None or time.monotonic() > end:
                    raise SandboxFailure("runtime_error", "not loaded in time")
                self._check_memory()
            self._check_memory()
        except SandboxFailure:
            self.close()
            return False
        pause_tree(self.sb.proc)
        self.paused = True
        return True

    def _check_memory(self) -> None:
        if tree_rss(self.sb.proc.pid) > self.memory_limit:
            raise SandboxFailure("runtime_error", "over the memory limit")

    def take(self) -> SandboxHandle | None:
        """The sandbox, running again, for its turn; None: its job was never sent (then it is closed)."""
        if not self.paused and not self._started():
            self.close()
            return None
        if self.paused:
            resume_tree(self.sb.proc)
            self.paused = False
        return self.sb

    def head_start(self, turn: float) -> float:
        """Seconds of its load (and first forward) done before its turn began at `turn` (monotonic)."""
        return round(max(0.0, min(self.answered or turn, turn) - self.started), 4)

    def close(self) -> None:
        if self.paused:
            resume_tree(self.sb.proc)  # a stopped process dies of SIGKILL all the same; resumed for its reaper
        self.sb.close()
        self._thread.join(5.0)  # its waits end once the sandbox is gone
