"""The GRPO reward: a completion's speedup over its parent, measured by the kernelsmith evaluator.

TRL's GRPOTrainer calls a reward function as
`f(prompts=..., completions=..., completion_ids=..., **columns, trainer_state=..., log_extra=..., log_metric=...)`
where each dataset column (here the flattened `meta` of a `kernelsmith data rl` row) arrives as a list
with one value per completion, and logs it under `f.__name__`. The reward of one completion is

    result.speedup / parent speedup re-measured here        (speedup vs eager for a first step)

clipped to [0, max_reward], and 0.0 when the reply has no usable program, the program is not
correct, or the evaluator flagged it. The parent is re-measured once per (task, parent code) on
this evaluator so that both numbers come from the same machine; if that fails, the row's stored
`parent_speedup` is used instead.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from kernelsmith.errors import TaskError
from kernelsmith.evaluate.options import EvalOptions
from kernelsmith.evaluate.pool import EvalBackend
from kernelsmith.evaluate.result import EvalResult
from kernelsmith.evaluate.verdict import is_success as verdict_success
from kernelsmith.evolve.edits import EditError, apply_reply
from kernelsmith.identity import program_hash
from kernelsmith.task import Task

NO_PROGRAM = "no_program"  # the reply held nothing apply_reply could turn into a program
EVAL_ERROR = "eval_error"  # the evaluator itself failed on this candidate (not a verdict on it)


@dataclass
class Scored:
    """One completion's verdict and reward."""

    status: str  # an EvalResult status, NO_PROGRAM or EVAL_ERROR
    reward: float
    speedup: float | None = None  # vs eager, as measured now
    parent_speedup: float | None = None  # the denominator used (None: first step, or no usable parent number)
    flags: list[str] = field(default_factory=list)
    error: str | None = None


@dataclass
class RewardBatch:
    """What the last call did: for logs and tests."""

    items: list[Scored]
    evaluations: int  # candidate evaluations submitted (identical programs of one task share one)
    parent_evaluations: int  # parents re-measured during this call (the others came from the cache)

    @property
    def statuses(self) -> list[str]:
        return [s.status for s in self.items]

    @property
    def errors(self) -> list[str | None]:
        return [s.error for s in self.items]

    @property
    def rewards(self) -> list[float]:
        return [s.reward for s in self.items]


def reply_text(completion: Any) -> str:
    """The text of a completion: a plain string, or the last assistant message of a conversation."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        completion = [completion]
    for message in reversed(completion or []):
        if message.get("role", "assistant") == "assistant":
            content = message.get("content") or ""
            if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}]
                content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
            return content
    return ""


def rewardable(result: EvalResult) -> bool:
    """A success by the one rule (EvalResult.success, evaluate/verdict.py's is_success), with a speedup to
    reward."""
    return result.success and result.speedup is not None


def _column(values: list | None, n: int) -> list:
    return list(values) if values is not None else [None] * n


class SpeedupReward:
    """A TRL reward function (see the module docstring) backed by an `EvalBackend`."""

    def __init__(self, backend: EvalBackend, options: EvalOptions | None = None, max_reward: float = 10.0):
        if not max_reward > 0:
            raise ValueError("max_reward must be positive")
        self.__name__ = "speedup_reward"  # TRL's name for it in logs ("rewards/speedup_reward/mean")
        self.backend = backend
        self.options = options
        self.max_reward = max_reward
        self._tasks: dict[str, Task] = {}
        self._parents: dict[tuple[str, str], float | None] = {}  # (task hash, code hash) -> speedup, None: failed
        self.last_batch: RewardBatch | None = None

    def task(self, source: str, name: str | None = None) -> Task:
        """The Task of a task file's text, built once per distinct text."""
        if source not in self._tasks:
            self._tasks[source] = Task.from_source(source, name=name or "task")
        return self._tasks[source]

    def parent_speedup(self, task: Task, parent_code: str) -> float | None:
        """The cached re-measurement of a parent (None: it failed here, or it was never measured)."""
        return self._parents.get((task.hash, program_hash(parent_code)))

    def __call__(
        self,
        prompts: list | None = None,
        completions: list | None = None,
        completion_ids: list | None = None,
        *,
        task_source: list[str],
        parent_code: list[str | None] | None = None,
        parent_speedup: list[float | None] | None = None,
        operator: list[str | None] | None = None,
        task: list[str | None] | None = None,
        log_extra: Callable | None = None,
        log_metric: Callable | None = None,
        **_ignored: Any,
    ) -> list[float]:
        completions = completions or []
        n = len(completions)
        parent_code, parent_speedup = _column(parent_code, n), _column(parent_speedup, n)
        operator, names = _column(operator, n), _column(task, n)

        # 1. every program and every parent not yet measured is submitted before anything is awaited
        programs: list[tuple[Task, str] | None] = [None] * n
        errors: list[str | None] = [None] * n
        pending: dict[tuple[str, str], Future] = {}  # (task hash, program hash) -> candidate verdict
        parents: dict[tuple[str, str], Future] = {}  # (task hash, parent code hash) -> parent verdict
        for i in range(n):
            t = self.task(task_source[i], names[i])
            parent = parent_code[i]
            mode = "diff" if operator[i] == "diff" and parent is not None else "rewrite"
            try:
                code = apply_reply(parent, reply_text(completions[i]), mode)
            except EditError as exc:
                errors[i] = str(exc)
                continue
            programs[i] = (t, code)
            if (t.hash, program_hash(code)) not in pending:
                pending[(t.hash, program_hash(code))] = self.backend.submit(t, code, self.options)
            if parent is not None:
                key = (t.hash, program_hash(parent))
                if key not in self._parents and key not in parents:
                    parents[key] = self.backend.submit(t, parent, self.options)

        # 2. wait
        verdicts = {key: self._outcome(fut) for key, fut in pending.items()}
        for key, fut in parents.items():
            result = self._outcome(fut)
            self._parents[key] = result.speedup if isinstance(result, EvalResult) and rewardable(result) else None

        # 3. score
        items = []
        for i in range(n):
            entry = programs[i]
            if entry is None:
                items.append(Scored(status=NO_PROGRAM, reward=0.0, error=errors[i]))
                continue
            t, code = entry
            base = None
            parent = parent_code[i]
            if parent is not None:
                base = self._parents.get((t.hash, program_hash(parent)))
                base = base if base is not None else parent_speedup[i]
            items.append(self._score(verdicts[(t.hash, program_hash(code))], base))
        self.last_batch = RewardBatch(items=items, evaluations=len(pending), parent_evaluations=len(parents))
        self._log(log_extra, log_metric)
        return [s.reward for s in items]

    @staticmethod
    def _outcome(fut: Future) -> EvalResult | str:
        """The verdict, or the evaluator's own failure as text. A broken task is the data's fault: it propagates."""
        try:
            return fut.result()
        except TaskError:
            raise
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"

    def _score(self, result: EvalResult | str, base: float | None) -> Scored:
        if isinstance(result, str):
            return Scored(status=EVAL_ERROR, reward=0.0, error=result)
        status = result.status.value
        if not rewardable(result):
            return Scored(
                status=status,
                reward=0.0,
                speedup=result.speedup,
                flags=[f.value for f in result.flags],
                error=result.error,
            )
        speedup = result.speedup if result.speedup is not None else 0.0  # a success always has one
        usable = base is not None and math.isfinite(base) and base > 0
        ratio = speedup / base if usable and base is not None else speedup
        reward = min(max(ratio, 0.0), self.max_reward) if math.isfinite(ratio) else 0.0
        return Scored(status=status, reward=reward, speedup=result.speedup, parent_speedup=base if usable else None)

    def _log(self, log_extra: Callable | None, log_metric: Callable | None) -> None:
        batch = self.last_batch
        if batch is None or not batch.items:
            return
        if log_extra is not None:  # a column of the completions table
            log_extra("eval_status", batch.statuses)
        if log_metric is not None:
            wins = sum(verdict_success(s.status, s.flags) for s in batch.items)
            log_metric("speedup_reward/correct_fraction", wins / len(batch.items))
            log_metric("speedup_reward/no_program_fraction", batch.statuses.count(NO_PROGRAM) / len(batch.items))
