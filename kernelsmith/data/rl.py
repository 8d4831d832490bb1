"""RL prompts (Kernel-Smith): the steps that led to each run's best program, as the search sent them.

For each run, the lineage of its best program (`RunStore.best()`: a success, replaced only by a
later one faster beyond timing noise) is followed back to its start; every LLM step on it
(messages stored; seed and tune programs have none) becomes a prompt. The meta carries what a
reward needs to score a new reply the way the search scored this step: the parent's code (a `diff`
reply is a set of edits to it) and the parent's speedup (the reward is the speedup relative to the
parent). A first step (translate) has neither; its reward is the speedup over eager. A parent that
is not a success (failed or flagged) gives parent_speedup None: its speedup is no baseline.

`RlResult.dropped` counts runs: "excluded_task", "no_correct_program" (no best program),
"no_llm_steps" (the best program's lineage holds no LLM step: the seed was never beaten).
Rows come out sorted by task name, run directory, program id.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kernelsmith.data.decontam import is_contaminated
from kernelsmith.data.steps import Run, read_runs

DROP_REASONS = ("excluded_task", "no_correct_program", "no_llm_steps")


@dataclass
class RlResult:
    rows: list[dict]
    kept: Counter = field(default_factory=Counter)  # task -> rows
    dropped: dict[str, int] = field(default_factory=dict)  # reason -> runs, all tasks
    dropped_by_task: Counter = field(default_factory=Counter)  # (task, reason) -> runs


def rl_rows(run: Run) -> list[dict]:
    """The prompts of one run's best lineage (empty without a best program)."""
    if run.best is None:
        return []
    chain = run.lineage(run.best)
    parents = dict(zip((p.id for p in chain[1:]), chain[:-1]))  # program id -> its parent on the chain
    rows = []
    for p in chain:
        if p.messages is None:
            continue
        parent = parents.get(p.id)
        rows.append(
            {
                "prompt": p.messages,
                "meta": {
                    "task": run.task,
                    "task_hash": run.task_hash,
                    "task_source": run.task_source,
                    "run_dir": run.run_dir,
                    "program_id": p.id,
                    "parent_id": p.parent_id,
                    "parent_code": parent.code if parent is not None else None,
                    "parent_speedup": parent.speedup if parent is not None and parent.ok else None,
                    "operator": p.operator,
                    "step_speedup": p.speedup,
                    "best_speedup": run.best.speedup,
                },
            }
        )
    return rows


def build_rl(run_dirs: Sequence[str | Path], exclude: set[str] | None = None) -> RlResult:
    """The RL prompts of the runs (rules in the module docstring)."""
    result = RlResult(rows=[])
    runs = sorted(read_runs(run_dirs), key=lambda r: (r.task, r.run_dir))
    for run in runs:
        if exclude and is_contaminated(run.task_source, exclude):
            result.dropped_by_task[(run.task, "excluded_task")] += 1
        elif run.best is None:
            result.dropped_by_task[(run.task, "no_correct_program")] += 1
        elif not (rows := rl_rows(run)):
            result.dropped_by_task[(run.task, "no_llm_steps")] += 1
        else:
            result.rows.extend(rows)
            result.kept[run.task] += len(rows)
    totals: Counter = Counter()
    for (_, reason), n in result.dropped_by_task.items():
        totals[reason] += n
    result.dropped = {reason: totals[reason] for reason in DROP_REASONS if totals[reason]}
    return result
