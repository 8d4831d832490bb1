"""What the terminal shows: progress lines, the live bar's final state, --quiet, `kernelsmith runs`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import REPO, case_path

KERNELSMITH = Path(sys.executable).parent / "kernelsmith"


def ks(*args, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(KERNELSMITH), *map(str, args)], capture_output=True, text=True, timeout=timeout, cwd=REPO
    )


def test_evolve_progress_quiet_and_runs_listing(tmp_path):
    runs = tmp_path / "runs"
    args = [
        "evolve",
        case_path("elementwise_task"),
        "--seed",
        case_path("elementwise_small_blocks"),
        "--mutator",
        "tune",
        "--device",
        "cpu",
        "--run-dir",
        runs / "elementwise",
    ]
    p = ks(*args, "--iterations", "2")
    assert p.returncode == 0, p.stderr[-2000:]
    out = p.stdout
    for line in (
        "kernelsmith evolve: elementwise_task, 2 iterations",
        "[  0/2] #1 iteration 0 island 0 seed: correct",
        "[  2/2] #3 iteration 2",
        "stopped: done; 2 iterations, 3 programs, 0 tokens",
        "best so far:",
        "summary: ",
    ):
        assert line in out, (line, out)
    assert "2/2" in out and "ETA" in out and "correct 3" in out  # the bar's final state, counts per status
    # issue 56: the search's pace, in one line and in summary.json (the noise floor's repeats are no programs)
    pace = json.loads((runs / "elementwise" / "summary.json").read_text())["evaluations"]
    assert pace["count"] == 3 and pace["per_minute"] > 0 and pace["phases"]["correctness"] > 0, pace
    assert "evaluations: 3 judged, " in out and " a minute of search time; their time: " in out, out
    report = runs / "elementwise" / "report.html"
    assert f"report: {report}" in " ".join(out.split()) and report.is_file()  # evolve writes it at the end
    again = ks("report", runs / "elementwise", "--out", tmp_path / "again.html")
    assert again.returncode == 0 and (tmp_path / "again.html").read_text().startswith("<!DOCTYPE html>")
    assert ks("report", tmp_path / "nowhere").returncode == 2
    # --quiet: no progress, only where the results are (the run resumes and has nothing left to do)
    quiet = ks(*args, "--iterations", "2", "--quiet")
    run = runs / "elementwise"
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stdout.splitlines() == [f"best: {run / 'best.py'}; summary: {run / 'summary.json'}"], quiet.stdout
    listing = ks("runs", runs)
    assert listing.returncode == 0 and "elementwise_task" in listing.stdout
    rows = json.loads(ks("runs", runs, "--json").stdout.strip().splitlines()[-1])
    assert [(r["task"], r["iterations_done"], r["programs"]) for r in rows] == [("elementwise_task", 2, 3)]
    assert rows[0]["best_speedup"] > 0 and rows[0]["run_dir"].endswith("elementwise")
    missing = ks("runs", tmp_path / "nowhere")  # no runs yet: an empty listing (tests/cli/test_cli_messages.py)
    assert missing.returncode == 0 and "no runs yet" in missing.stdout, missing.stderr


def test_a_resumed_run_shows_its_stored_progress(cpu_pool, tmp_path):
    """Issue 15, item 14: the live view of a resumed run starts from what the store holds (iterations
    done, correct programs by the success rule, the best) and counts on from there."""
    from io import StringIO

    from rich.console import Console

    from kernelsmith.evolve.run import evolve_config, run_evolve
    from kernelsmith.evolve.store import RunStore
    from kernelsmith.progress import LiveProgress
    from kernelsmith.task import Task

    task, seed = Task.from_file(case_path("elementwise_task")), case_path("elementwise_small_blocks").read_text()
    run_dir = tmp_path / "run"

    def run(iterations: int) -> tuple[LiveProgress, str, list[str]]:
        cfg = evolve_config(None, {"iterations": iterations, "evaluation": {"device": "cpu"}}, "tune")
        console, lines = Console(file=StringIO(), width=200), []
        with LiveProgress(console, task.name, iterations) as view:
            run_evolve(task, seed, cfg, run_dir, lines.append, backend=cpu_pool, view=view)
        return view, console.file.getvalue(), lines

    def stored() -> tuple[int, int, object]:
        store = RunStore(run_dir, create=False)
        try:
            programs = store.all()
            return sum(p.iteration > 0 for p in programs), sum(p.ok for p in programs), store.best()
        finally:
            store.close()

    run(2)
    done, correct, best = stored()
    assert (done, correct) == (2, 3) and best is not None and best.speedup > 0
    for iterations, expect_done in ((2, 2), (3, 3)):  # nothing left to do; then one more iteration
        view, text, lines = run(iterations)
        done, correct, best = stored()
        assert done == expect_done and view.progress.tasks[0].completed == done
        assert view.counts["correct"] == correct and sum(view.counts.values()) == done + 1
        assert view.best.startswith(f"{best.speedup:.3g}x vs the reference") and f"(program #{best.id}," in view.best
        assert f"{done}/{iterations}" in text and f"correct {correct}" in text, text
        assert f"best so far: {best.speedup:.3g}x" in text, text
        assert any(line.startswith("resuming: 2/") and "3 correct programs" in line for line in lines), lines
        # issue 55: `make demo`'s last figure (0.000703x) says what it is on the CPU
        said = f"{best.speedup:.3g}x vs the reference: Triton's interpreter against native PyTorch on the CPU, relative"
        assert any(line.startswith("best: program") and said in line for line in lines), lines


def test_progress_words_keep_flags_and_count_in_the_right_number():
    """A flagged program's flags show (rich read "[no_custom_kernel]" as a markup tag: "rejected ; best"),
    and counts of one are singular ("1 iteration", not "1 iterations")."""
    from io import StringIO

    from rich.console import Console

    from kernelsmith.evolve.engine import Event, Resumed
    from kernelsmith.evolve.program import Program
    from kernelsmith.evolve.run import progress_line, resume_line
    from kernelsmith.evolve.tuning import TuningMemory
    from kernelsmith.progress import counted

    def shown(markup: str) -> str:
        console = Console(file=StringIO(), width=300)
        console.print(markup, highlight=False, soft_wrap=True)
        return console.file.getvalue().strip()

    best = Program(0, 0, "seed", "x", "correct", speedup=1.0, id=1)
    flagged = Program(1, 0, "tune", "y", "rejected", parent_id=1, flags=["no_custom_kernel"], id=2)
    line = shown(progress_line(Event(flagged, best, False, 1, 1)))
    assert line == "[  1/1] #2 iteration 1 island 0 tune of #1: rejected [no_custom_kernel]; best 1x (#1)"
    assert shown(resume_line(Resumed(best, 1, 1, {"correct": 1}))) == (
        "resuming: 1/1 iteration stored, 1 correct program; best 1x (#1)"
    )
    assert [counted(n, "launch", "launches") for n in (0, 1, 2)] == ["0 launches", "1 launch", "2 launches"]
    tuning = TuningMemory()
    tuning.record("family", {"BLOCK": 64}, 1.0, 1, True)
    tuning.space["family"] = {}
    assert tuning.exhausted().endswith("of the program family it tuned is measured (1 configuration measured)")


def test_eval_table_counts_one_launch(monkeypatch):
    from io import StringIO

    from rich.console import Console

    from kernelsmith.cli import eval as eval_cli
    from kernelsmith.evaluate.result import EvalResult, Status

    monkeypatch.setattr(eval_cli, "console", Console(file=StringIO(), width=200))
    result = EvalResult(status=Status.correct, correct=True, device="cpu", triton_kernels=["k"], kernel_launches=1)
    eval_cli.print_result(result, "task", "candidate")
    assert "k  (1 launch in trials)" in eval_cli.console.file.getvalue()


def test_a_faster_program_that_is_not_the_new_best_says_it_is_within_noise():
    """Issue 46, item 4: a correct program faster than the best was printed beside an unchanged best
    with no reason; the rule is that it is not faster beyond both programs' timing noise."""
    from kernelsmith.evolve.engine import Event
    from kernelsmith.evolve.program import Program
    from kernelsmith.evolve.run import progress_line

    best = Program(0, 0, "seed", "x", "correct", speedup=1.0, id=1)
    faster = Program(1, 0, "tune", "y", "correct", parent_id=1, speedup=2.0, id=2)
    slower = Program(2, 0, "tune", "z", "correct", parent_id=1, speedup=0.5, id=3)
    assert progress_line(Event(faster, best, False, 1, 2)).endswith("correct 2x; best 1x (#1) (within noise of #1)")
    assert progress_line(Event(slower, best, False, 2, 2)).endswith("correct 0.5x; best 1x (#1)")
    assert progress_line(Event(faster, faster, True, 1, 2)).endswith("best 2x (#2) [bold green]new best[/]")


def test_a_refused_resume_does_not_say_there_is_no_correct_program(tmp_path):
    """Issue 46, item 4: a resume refused at its start (another --seed) drew the live view's default,
    "best so far: no correct program yet", above a run that has correct programs: nothing is drawn
    before the run says where it stands."""
    from io import StringIO

    import pytest
    from rich.console import Console
    from test_bench import RecordingBackend

    from kernelsmith.errors import UserError
    from kernelsmith.evolve.run import evolve_config, run_evolve
    from kernelsmith.progress import LiveProgress
    from kernelsmith.task import Task

    task, seed = Task.from_file(case_path("elementwise_task")), case_path("elementwise_small_blocks").read_text()
    cfg = evolve_config(None, {"iterations": 1, "evaluation": {"device": "cpu"}}, "tune")

    def run(seed_code: str) -> str:
        console = Console(file=StringIO(), width=200)
        with LiveProgress(console, task.name, 1) as view:
            run_evolve(task, seed_code, cfg, tmp_path / "run", lambda text: None, RecordingBackend(), view=view)
        return console.file.getvalue()

    assert "best so far: 1x vs the reference" in run(seed)  # a run with correct programs
    console = Console(file=StringIO(), width=200)
    with pytest.raises(UserError, match="this --seed is another program"):
        with LiveProgress(console, task.name, 1) as view:
            other = seed.replace("BLOCK = 256", "BLOCK = 512")
            run_evolve(task, other, cfg, tmp_path / "run", lambda text: None, RecordingBackend(), view=view)
    assert "best so far" not in console.file.getvalue() and "no correct program" not in console.file.getvalue()
