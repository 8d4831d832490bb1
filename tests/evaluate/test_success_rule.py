"""One rule decides success, and every consumer agrees with it: the search's program, bench's row,
the GRPO reward and the SFT export. Task notes never make an honest candidate fail; flags always do."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from rich.console import Console

from kernelsmith.cli.eval_record import verdict_record, verdict_table
from kernelsmith.data.sft import _verdict
from kernelsmith.data.steps import Step
from kernelsmith.evaluate.result import EvalResult, Status
from kernelsmith.evaluate.verdict import Flag, TaskNote, is_success
from kernelsmith.evolve.program import FLAGGED_SCORE, Program
from kernelsmith.suite.bench import TaskRow
from kernelsmith.train.reward import SpeedupReward

HONEST_NOTED = dict(
    status=Status.correct,
    correct=True,
    speedup=1.3,
    task_notes={TaskNote.degenerate_tolerance: "zeros pass the tolerance"},
)
CHEAT = dict(
    status=Status.correct,
    correct=True,
    speedup=3.0,
    flags=[Flag.torch_compute_op],
    flag_details={Flag.torch_compute_op: "library kernels ran every compute step of the reference"},
)
CASES = [
    (HONEST_NOTED, True),
    (CHEAT, False),
    (dict(status=Status.incorrect, correct=False), False),
    (dict(status=Status.correct, correct=True, speedup=2.0, flags=[Flag.timing_mismatch]), False),
]


@pytest.mark.parametrize("fields,expected", CASES)
def test_the_rule(fields, expected):
    r = EvalResult(**fields)
    assert r.success is expected
    assert is_success(r.status, r.flags) is expected
    assert is_success(r.status.value, [f.value for f in r.flags]) is expected


def test_legacy_degenerate_flag_reads_back_as_a_task_note():
    old = {
        "status": "correct",
        "correct": True,
        "speedup": 1.2,
        "flags": ["degenerate_task"],
        "flag_details": {"degenerate_task": "zeros pass"},
    }
    r = EvalResult.model_validate(old)
    assert r.flags == [] and TaskNote.degenerate_tolerance in r.task_notes and r.success
    assert is_success("correct", ["degenerate_task"])  # a stored program row of an older run


@pytest.mark.parametrize("fields,expected", CASES)
def test_search_program_agrees(fields, expected):
    p = Program(iteration=1, island=0, operator="rewrite", code="x = 1", status="incorrect").with_verdict(
        EvalResult(**fields)
    )
    assert p.ok is expected
    if expected:
        assert p.score == pytest.approx(fields["speedup"])
    elif fields["status"] == Status.correct:
        assert p.score == FLAGGED_SCORE


@pytest.mark.parametrize("fields,expected", CASES)
def test_bench_row_agrees(fields, expected):
    r = EvalResult(**fields)
    row = TaskRow(
        task="t", status=r.status.value, correct=r.correct, flags=[f.value for f in r.flags], speedup=r.speedup
    )
    assert row.success is expected
    assert json.loads(row.model_dump_json())["success"] is expected  # a key of bench --json's rows


def _rendered(table) -> str:
    console = Console(file=StringIO(), width=300, color_system=None)
    console.print(table)
    return console.file.getvalue()


@pytest.mark.parametrize("fields,expected", CASES)
def test_eval_json_and_table_agree(fields, expected):
    """Issue 29, item 7: eval --json had no `success` (the README says it has), and the table showed
    `correct` beside a flag with nothing saying that it is not a success."""
    r = EvalResult(**fields)
    assert json.loads(verdict_record(r))["success"] is expected
    status_row = next(line for line in _rendered(verdict_table(r, "task", "cand")).splitlines() if "status" in line)
    if expected:
        assert "correct -> success" in status_row
    elif r.correct:
        flags = ", ".join(f.value for f in r.flags)
        assert f"correct, but flagged: {flags} -> not a success" in status_row
    else:
        assert f"{r.status.value} -> not a success" in status_row


@pytest.mark.parametrize("fields,expected", CASES)
def test_grpo_reward_agrees(fields, expected):
    reward = SpeedupReward.__new__(SpeedupReward)  # scoring needs no backend
    reward.max_reward = 10.0
    scored = reward._score(EvalResult(**fields), None)
    assert (scored.reward > 0) is expected


@pytest.mark.parametrize("fields,expected", CASES)
def test_sft_export_agrees(fields, expected):
    parent = Program(iteration=0, island=0, operator="seed", code="p = 0", status="correct", correct=True, speedup=1.0)
    child = Program(
        iteration=1,
        island=0,
        operator="rewrite",
        code="x = 1",
        status="incorrect",
        messages=[{"role": "user", "content": "improve"}],
        response="```python\nx = 1\n```",
        parent_id=1,
    ).with_verdict(EvalResult(**fields))
    step = Step(program=child, parent=parent, task="t", task_hash="h", task_source="", run_dir="r")
    reason = _verdict(step, min_gain=1.0, excluded=False)
    assert (reason in ("first", "improvement")) is expected, reason
