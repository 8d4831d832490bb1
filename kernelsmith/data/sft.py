"""Step-centric SFT rows (Kernel-Smith): the LLM steps that kept the program correct and made it faster.

A row is one step: the exact messages the search sent (system, user) and the raw reply as the
assistant turn. Which steps become rows:

- Only LLM steps: seed and tune programs have no messages ("no_llm_messages").
- A first step (no parent: the translate operator) is kept when it is correct ("not_correct")
  and unflagged ("flagged").
- A later step is kept when it is correct and unflagged, its code is not its parent's up to
  formatting, comments and docstrings ("same_as_parent": any gain it shows is timing noise), its
  parent is correct and unflagged ("parent_not_correct"), both have a speedup ("no_speedup"), and
  gain = child speedup / parent speedup is strictly above `min_gain` ("gain_below_min") and above
  `required_gain`, min_gain widened by both programs' timing noise ("within_noise": each
  verdict's spread, floored by its timing method's spread between evaluations).
- Rank: a kept step ranks by its gain, a first step by its speedup (None counts as 0); ties go
  to the earlier (run directory, program id).
- Duplicates: steps of one task whose code is equal up to comments, whitespace, formatting and
  docstrings (`kernelsmith.identity`): the best-ranked one is kept ("duplicate").
- Cap (`max_per_task`): per task (by task hash), the best-ranked N rows are kept ("over_task_cap").
- `exclude` (hashes from `kernelsmith.data.decontam.suite_hashes`): every step of a task whose
  source matches is dropped ("excluded_task"), before any other rule.

Rows come out sorted by task name, run directory, program id.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kernelsmith.data.decontam import is_contaminated
from kernelsmith.data.steps import Step, read_steps
from kernelsmith.errors import UserError
from kernelsmith.evaluate.measuring.noise import Floors, pair_noise
from kernelsmith.evaluate.result import Status
from kernelsmith.evolve.program import Program
from kernelsmith.identity import program_hash

FIRST, IMPROVEMENT = "first", "improvement"
DROP_REASONS = (
    "excluded_task",
    "no_llm_messages",
    "not_correct",
    "flagged",
    "same_as_parent",
    "parent_not_correct",
    "no_speedup",
    "gain_below_min",
    "within_noise",
    "duplicate",
    "over_task_cap",
)


@dataclass
class SftResult:
    rows: list[dict]
    kept: Counter = field(default_factory=Counter)  # (task, "first" | "improvement") -> rows
    dropped: dict[str, int] = field(default_factory=dict)  # reason -> steps, all tasks
    dropped_by_task: Counter = field(default_factory=Counter)  # (task, reason) -> steps


def required_gain(parent: Program, child: Program, min_gain: float = 1.0, floors: Floors | None = None) -> float:
    """The gain a step must beat: min_gain * (1 + the noise of the two programs' speedup ratio).

    That noise is `kernelsmith.evaluate.measuring.noise.pair_noise` of their stored `eval` records: both
    candidates' timing noise (and the references', when the two were timed against different
    reference measurements), each the larger of its own spread (std / median of the repetitions)
    and the floor of the method that measured it, which covers how far a time moves between two
    evaluations. A gain inside that margin may be noise. A record of an older version (no method)
    adds its spreads only; a program stored without timing statistics adds no margin. `floors`: the
    run's measured floors (a CPU run's, RunStore.noise_floors()), as its best was chosen with."""
    return min_gain * (1.0 + pair_noise(parent.eval, child.eval, floors))


def _verdict(step: Step, min_gain: float, excluded: bool) -> str:
    """FIRST or IMPROVEMENT for a step that may become a row, else the reason it may not."""
    p = step.program
    if excluded:
        return "excluded_task"
    if not step.is_llm:
        return "no_llm_messages"
    if p.status != Status.correct.value:
        return "not_correct"
    if not p.ok:
        return "flagged"
    if step.is_first:
        return FIRST
    if step.same_as_parent:
        return "same_as_parent"
    if step.parent is None or not step.parent.ok:
        return "parent_not_correct"
    gain = step.gain
    if gain is None:
        return "no_speedup"  # the child's or the parent's speedup was not measured
    if gain <= min_gain:
        return "gain_below_min"
    return IMPROVEMENT if gain > required_gain(step.parent, p, min_gain, step.floors) else "within_noise"


def _rank(step: Step, kind: str) -> tuple:
    """Sort key, best first: gain (improvements) or speedup (first steps), then earlier steps."""
    value = step.gain if kind == IMPROVEMENT else step.program.speedup
    return (-(value or 0.0), step.run_dir, step.program.id)


def sft_row(step: Step, kind: str) -> dict:
    p = step.program
    if p.messages is None:
        raise ValueError(f"program {p.id} has no LLM messages: only LLM steps become SFT rows")
    return {
        "messages": [*p.messages, {"role": "assistant", "content": p.response}],
        "meta": {
            "task": step.task,
            "task_hash": step.task_hash,
            "run_dir": step.run_dir,
            "program_id": p.id,
            "parent_id": p.parent_id,
            "iteration": p.iteration,
            "operator": p.operator,
            "model": p.model,
            "speedup": p.speedup,
            "parent_speedup": step.parent_speedup,
            "gain": step.gain if kind == IMPROVEMENT else None,
            "speedup_vs_compile": p.speedup_vs_compile,
            "kind": kind,
        },
    }


def build_sft(
    run_dirs: Sequence[str | Path],
    min_gain: float = 1.0,
    max_per_task: int | None = None,
    exclude: set[str] | None = None,
) -> SftResult:
    """The SFT rows of the runs (rules in the module docstring)."""
    if min_gain < 0:
        raise UserError(f"--min-gain must be >= 0, got {min_gain}")
    if max_per_task is not None and max_per_task < 1:
        raise UserError(f"--max-per-task must be >= 1, got {max_per_task}")
    result = SftResult(rows=[])

    def drop(step: Step, reason: str) -> None:
        result.dropped_by_task[(step.task, reason)] += 1

    candidates: dict[str, list[tuple[Step, str]]] = {}  # task hash -> steps that pass the filters
    excluded: dict[str, bool] = {}  # task hash -> its source matches `exclude`
    for step in read_steps(run_dirs):
        if step.task_hash not in excluded:
            excluded[step.task_hash] = bool(exclude) and is_contaminated(step.task_source, exclude)
        verdict = _verdict(step, min_gain, excluded[step.task_hash])
        if verdict in (FIRST, IMPROVEMENT):
            candidates.setdefault(step.task_hash, []).append((step, verdict))
        else:
            drop(step, verdict)

    chosen: list[tuple[Step, str]] = []
    for steps in candidates.values():
        steps.sort(key=lambda sk: _rank(*sk))
        seen: set[str] = set()
        unique = []
        for step, kind in steps:
            key = program_hash(step.program.code or "")
            if key in seen:
                drop(step, "duplicate")
            else:
                seen.add(key)
                unique.append((step, kind))
        cap = len(unique) if max_per_task is None else max_per_task
        for step, _kind in unique[cap:]:
            drop(step, "over_task_cap")
        chosen.extend(unique[:cap])

    chosen.sort(key=lambda sk: (sk[0].task, sk[0].run_dir, sk[0].program.id))
    for step, kind in chosen:
        result.rows.append(sft_row(step, kind))
        result.kept[(step.task, kind)] += 1
    totals: Counter = Counter()
    for (_, reason), n in result.dropped_by_task.items():
        totals[reason] += n
    result.dropped = {reason: totals[reason] for reason in DROP_REASONS if totals[reason]}
    return result
