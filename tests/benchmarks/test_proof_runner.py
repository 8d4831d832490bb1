"""The GPU proof's driver (benchmarks/device/proof.py) on the CPU: its state, which step runs next, a
step's rows resumed across device calls, and the call's time budget. Each device call starts from a
fresh copy of the repo, so these tests copy a call's output over the "committed" results, as the lead
does, between calls."""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

import pytest

DEVICE = Path(__file__).resolve().parents[2] / "benchmarks" / "device"
sys.path.insert(0, str(DEVICE))

import proof  # noqa: E402
import proof_core as core  # noqa: E402
import proof_kb  # noqa: E402
from apply_summary import summary_lines  # noqa: E402
from proof_steps import SCRIPTS, Step  # noqa: E402


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def make_ctx(tmp: Path, results: Path, clock: Clock, budget: float, call: int) -> core.Ctx:
    out = tmp / f"out{call}" / "proof"
    out.mkdir(parents=True)
    return core.Ctx(
        out=out,
        results=results,
        work=tmp / f"work{call}",
        deadline=clock() + budget,
        device="cpu",
        machine={"card": "test card", "date": "today"},
        call=call,
        clock=clock,
    )


def take(ctx: core.Ctx, results: Path) -> None:
    """What the lead does after a call: its files over the committed results."""
    shutil.copytree(ctx.out, results, dirs_exist_ok=True)


def whole_step(name: str, seconds: float, clock: Clock, need: float = 50.0, files: int = 2) -> Step:
    def run(ctx: core.Ctx) -> core.Outcome:
        clock.now += seconds
        return core.Outcome("done", f"{name} ran")

    return Step(name, name, "1", need, files, run)


def row_step(keys: list[str], seconds: float, clock: Clock, computed: list[str]) -> Step:
    """A step of many rows, as kb-tune is: the committed rows are skipped, each row costs `seconds`."""

    def run(ctx: core.Ctx) -> core.Outcome:
        old = core.read_rows(ctx.step_results("rows") / "rows.jsonl")

        def do_row(key: str) -> dict:
            computed.append(key)
            clock.now += seconds
            return {"task": key, "seconds": seconds, "ran": True, "call": ctx.call}

        new = proof_kb.run_rows(ctx, core.rows_left(keys, old), do_row, lambda: seconds)
        rows = core.merge_rows(old, new)
        core.write_rows(ctx.step_out("rows") / "rows.jsonl", rows)
        left = core.rows_left(keys, rows)
        status = "done" if not left else "partial"
        return core.Outcome(status, f"{len(rows)} rows", "", len(keys) - len(left), len(keys), len(new))

    return Step("rows", "rows", "5", seconds, 2, run)


def test_state_round_trip_and_a_missing_file(tmp_path):
    assert core.State.load(tmp_path / "state.json").steps == {}
    state = core.State()
    core.record(state, "a", core.Outcome("done", "fine"), {"n": 1, "card": "H100"})
    (tmp_path / "state.json").write_text(state.to_json())
    again = core.State.load(tmp_path / "state.json")
    assert again.steps["a"].status == "done" and again.steps["a"].history[0]["card"] == "H100"
    (tmp_path / "state.json").write_text(json.dumps({"format": 99, "steps": {}}))
    with pytest.raises(ValueError, match="format 99"):
        core.State.load(tmp_path / "state.json")


def test_the_next_step_is_the_first_not_finished():
    state = core.State()
    order = ["a", "b", "c", "d", "e"]
    for name, status in (("a", "done"), ("b", "failed"), ("c", "retry"), ("d", "skipped")):
        state.step(name).status = status
    assert core.pending(order, state) == ["c", "e"]
    core.redo(state, "a")
    assert core.pending(order, state) == ["a", "c", "e"]


def test_a_step_that_breaks_is_retried_once_then_passed_over():
    state, call = core.State(), {"n": 1}
    assert core.record(state, "g", core.Outcome("timeout", "killed"), call).status == "retry"
    assert core.record(state, "g", core.Outcome("error", "broke"), call).status == "failed"
    assert core.record(state, "r", core.Outcome("partial", "", new_rows=3), call).status == "partial"
    assert core.record(state, "r", core.Outcome("partial", "", new_rows=0), call).status == "partial"
    assert core.record(state, "r", core.Outcome("timeout", "", new_rows=2), call).status == "partial"  # progress
    assert core.record(state, "r", core.Outcome("partial", "", new_rows=0), call).status == "partial"
    assert core.record(state, "r", core.Outcome("partial", "", new_rows=0), call).status == "failed"
    assert state.steps["r"].attempts == 5 and len(state.steps["r"].history) == 5


def test_rows_merge_by_key_and_a_row_marked_not_final_is_left():
    old = [{"task": "a", "v": 1}, {"task": "b", "v": 1, "final": False}]
    merged = core.merge_rows(old, [{"task": "b", "v": 2}, {"task": "c", "v": 2}])
    assert [(r["task"], r["v"]) for r in merged] == [("a", 1), ("b", 2), ("c", 2)]
    assert core.rows_left(["a", "b", "c", "d"], old) == ["b", "c", "d"]
    assert core.rows_left(["a", "b", "c", "d"], merged) == ["d"]


def test_rows_resume_across_calls_within_each_calls_budget(tmp_path):
    """Call 1 runs a whole step and two rows; calls 2 and 3 go on with the rows left: every row is
    computed once, none past a call's deadline, and the state says done after the last."""
    clock, results, computed = Clock(), tmp_path / "results", []
    keys = [f"k{i}" for i in range(10)]
    steps = [whole_step("gate", 100.0, clock), row_step(keys, 60.0, clock, computed)]
    for call, expect_rows in ((1, 2), (2, 4), (3, 4)):
        state = core.State.load(results / "state.json")
        ctx = make_ctx(tmp_path, results, clock, budget=300.0, call=call)
        before = len(computed)
        proof.run_call(ctx, state, steps)
        assert len(computed) - before == expect_rows
        assert clock.now <= ctx.deadline, "a row ran past the call's budget"
        take(ctx, results)
    assert computed == keys, "a row was computed twice or skipped: resumption is broken"
    rows = core.read_rows(results / "rows" / "rows.jsonl")
    assert [r["task"] for r in rows] == keys and {r["call"] for r in rows} == {1, 2, 3}
    state = core.State.load(results / "state.json")
    assert state.steps["gate"].attempts == 1 and state.steps["gate"].status == "done"
    assert state.steps["rows"].status == "done" and state.steps["rows"].rows_done == 10
    assert [h["n"] for h in state.steps["rows"].history] == [1, 2, 3]


def test_a_step_that_does_not_fit_the_time_or_the_files_waits_for_the_next_call(tmp_path):
    clock, results = Clock(), tmp_path / "results"
    steps = [whole_step("a", 200.0, clock), whole_step("b", 10.0, clock, need=150.0), whole_step("c", 1.0, clock)]
    ctx = make_ctx(tmp_path, results, clock, budget=300.0, call=1)
    state = core.State()
    assert proof.run_call(ctx, state, steps) == ["a"]  # 100 s left, b needs 150: c waits behind b
    assert core.pending(["a", "b", "c"], state) == ["b", "c"]
    take(ctx, results)
    state = core.State.load(results / "state.json")
    ctx = make_ctx(tmp_path, results, clock, budget=300.0, call=2)
    many = [whole_step("b", 1.0, clock, files=7), whole_step("c", 1.0, clock, files=7)]
    assert proof.run_call(ctx, state, many) == [
        "b"
    ]  # b wrote 2 files (its summary, state.json): 2 + c's 7 would pass 8
    assert ctx.files_written() <= core.MAX_FILES


def test_a_tuner_row_cut_by_the_time_runs_again_once(tmp_path, monkeypatch):
    summary = {
        "iterations_done": 7,
        "stop_reason": "time limit reached (300 s)",
        "programs": 8,
        "best": {"success": True, "speedup": 1.2, "speedup_vs_compile": 1.1, "candidate_ms": 2.0, "iteration": 5},
    }

    def fake_run(cmd, log, limit, env=None):
        run_dir = Path(cmd[cmd.index("--run-dir") + 1])
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "summary.json").write_text(json.dumps(summary))
        return core.Ran(0, 300.0, log)

    monkeypatch.setattr(proof_kb, "run_logged", fake_run)
    cands = tmp_path / "c"
    (cands / "candidates" / "level1").mkdir(parents=True)
    (cands / "candidates" / "level1" / "1_x.py").write_text("pass")
    ctx = make_ctx(tmp_path, tmp_path / "results", Clock(), budget=600.0, call=1)
    seed = {"success": True, "speedup": 1.0, "speedup_vs_compile": 0.9}
    first = proof_kb.tune_row(ctx, "level1/1_x", seed, cands, tmp_path / "runs", tmp_path / "log", {})
    assert first["final"] is False and first["compile_ms"] == pytest.approx(2.2)
    second = proof_kb.tune_row(ctx, "level1/1_x", seed, cands, tmp_path / "runs", tmp_path / "log", first)
    assert second["final"] is True and second["attempts"] == 2
    unseeded = proof_kb.tune_row(
        ctx, "level1/2_y", {"success": False, "reason": "no"}, cands, tmp_path, tmp_path / "l", {}
    )
    assert unseeded["final"] and unseeded["status"] == "no successful seed"


def test_a_command_is_killed_at_its_limit(tmp_path):
    t0 = time.monotonic()
    ran = core.run_logged(["bash", "-c", "sleep 30 & sleep 30"], tmp_path / "log", limit=1.0)
    assert ran.rc is None and time.monotonic() - t0 < 20
    assert "killed at the time limit" in (tmp_path / "log").read_text()


def test_take_copies_a_calls_results_and_names_the_tree(tmp_path):
    out, results = tmp_path / "files" / "proof", tmp_path / "results"
    (out / "gate-pytest").mkdir(parents=True)
    state = core.State()
    state.calls.append({"n": 1, "card": "H100", "steps": ["gate-pytest"], "commit": "?"})
    (out / "state.json").write_text(state.to_json())
    (out / "gate-pytest" / "summary.md").write_text("### Gate\n\ntoday, **H100**, tree ?; proof call 1\n")
    assert proof.take(tmp_path / "files", results) == 0
    assert "tree ?;" not in (results / "gate-pytest" / "summary.md").read_text()
    assert core.State.load(results / "state.json").calls[0]["commit"] != "?"


def test_redo_marks_finished_steps_to_run_first_on_the_next_call(tmp_path, capsys):
    """A commit that waits for the gate: `--redo` here puts the gate's steps back in front of the queue,
    their history kept; a step name that is not one is one line and exit 2."""
    state = core.State()
    for name in ("gate-pytest", "llama-b1"):
        state.step(name).status = "done"
        state.step(name).history.append({"n": 1, "status": "done"})
    (tmp_path / "state.json").write_text(state.to_json())
    assert core.pending([s.name for s in proof.STEPS], state)[0] == "gate-verdicts"
    assert proof.main(["--results", str(tmp_path), "--redo", "gate-pytest", "--redo", "llama-b1"]) == 0
    again = core.State.load(tmp_path / "state.json")
    assert core.pending([s.name for s in proof.STEPS], again)[:3] == ["gate-pytest", "gate-verdicts", "llama-b1"]
    assert (
        again.step("gate-pytest").history == [{"n": 1, "status": "done"}]
        and "asked to run again" in capsys.readouterr().out
    )
    with pytest.raises(SystemExit) as exc:
        proof.main(["--results", str(tmp_path), "--redo", "gate"])
    assert exc.value.code == 2 and "--redo gate: the steps are" in capsys.readouterr().err


def test_apply_summary_names_each_mode_and_the_prediction():
    spread = lambda m: {"median": m, "low": m * 0.9, "high": m * 1.1}  # noqa: E731
    applied = {
        "kernels": [{"name": "norm", "speedup": 1.5, "why": None}, {"name": "gelu", "speedup": 0.8, "why": "slower"}],
        "prediction": {"measure": "device time", "speedup": 1.1, "low": 1.0, "high": 1.2, "covered": 0.3},
        "checks": [
            {
                "mode": "eager",
                "outputs_match": True,
                "fired": {"norm": 2.0},
                "timings": [{"measure": "device time", "before_ms": spread(2.0), "after_ms": spread(1.0)}],
            },
            {
                "mode": "compile",
                "outputs_match": False,
                "mismatch": "output 0",
                "graph_breaks": [0, 1],
                "fired": {},
                "timings": [],
            },
        ],
    }
    lines = summary_lines(applied, "gpt2")
    assert lines[0] == "gpt2: kernels applied: norm 1.5x" and "gelu (slower)" in lines[1]
    assert "2x; predicted 1.1x (1-1.2) over 30.0%" in lines[3]
    assert "outputs differ: output 0, graph breaks 1 (unpatched 0)" in lines[4]


def test_every_script_the_steps_and_device_scripts_run_is_in_the_tree():
    """A step runs its script by path from the repo root, and so does a device script the scripts it calls:
    one moved without its caller fails the device call, not a test on the CPU."""
    import re

    repo = DEVICE.parents[1]
    named = list(SCRIPTS)
    for script in DEVICE.glob("*.sh"):
        named += re.findall(r"\bbenchmarks/[\w/.-]+\.(?:py|sh)\b", script.read_text())
    assert [path for path in named if not (repo / path).exists()] == []
