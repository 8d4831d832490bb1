"""Suite benchmarking: the metrics on hand-computed outcomes, discovery, and a real CPU run."""

from __future__ import annotations

import json
import math
import shutil
from concurrent.futures import Future
from pathlib import Path

import pytest
from conftest import REPO

from kernelsmith.errors import UserError
from kernelsmith.suite import metrics
from kernelsmith.suite.bench import BenchReport, TaskRow, run_bench, scan_suite, summarize
from kernelsmith.task import Task

# -- metrics ------------------------------------------------------------------------------

# Six tasks: two failures, one success exactly at 1.0, one below 1, one at 1.5, one at 3.0.
OUTCOMES = [(False, None), (False, 4.0), (True, 1.0), (True, 0.5), (True, 1.5), (True, 3.0)]


def test_fast_p_counts_strictly_greater_over_all_tasks():
    assert metrics.fast_p(OUTCOMES, 0.0) == pytest.approx(4 / 6)  # every success: fast_0 = correctness
    assert metrics.fast_p(OUTCOMES, 1.0) == pytest.approx(2 / 6)  # 1.0 itself does not clear p = 1
    assert metrics.fast_p(OUTCOMES, 1.5) == pytest.approx(1 / 6)  # nor 1.5 clear p = 1.5
    assert metrics.fast_p(OUTCOMES, 2.0) == pytest.approx(1 / 6)
    assert metrics.fast_p_table(OUTCOMES) == pytest.approx({"0": 4 / 6, "1": 2 / 6, "1.5": 1 / 6, "2": 1 / 6})
    assert metrics.correct_rate(OUTCOMES) == pytest.approx(4 / 6)


def test_fast_p_matches_kernelbench_unit_test_numbers():
    # KernelBench's test_score.py case: times (baseline, actual); speedups 0.8, 1.0333.., 0.5, 1.0 correct.
    times = [(0.24, 0.3), (0.31, 0.3), (100.0, 200.0), (0.0001, 0.0001), (0.3, 0.3)]
    correct = [True, True, True, True, False]
    outcomes = [(ok, b / a) for ok, (b, a) in zip(correct, times)]
    assert metrics.fast_p(outcomes, 1.0) == pytest.approx(0.2)
    assert metrics.fast_p(outcomes, 0.5) == pytest.approx(0.6)


def test_amsr_counts_failures_and_slowdowns_as_zero():
    # (0 + 0 + 1.0 + 0 + 1.5 + 3.0) / 6: the failure's 4.0 and the success's 0.5 count as 0.
    assert metrics.amsr(OUTCOMES) == pytest.approx(5.5 / 6)


def test_geomean_is_over_successes_only():
    assert metrics.geomean_speedup(OUTCOMES) == pytest.approx((1.0 * 0.5 * 1.5 * 3.0) ** 0.25)
    assert metrics.geomean_speedup([(True, 2.0), (True, 8.0), (False, 100.0)]) == pytest.approx(4.0)


def test_no_success_and_no_tasks():
    failed = [(False, None), (False, 2.0)]
    assert metrics.fast_p_table(failed) == {"0": 0.0, "1": 0.0, "1.5": 0.0, "2": 0.0}
    assert metrics.amsr(failed) == 0.0
    assert metrics.geomean_speedup(failed) is None
    assert metrics.correct_rate([]) == 0.0 and metrics.fast_p([], 1.0) == 0.0 and metrics.amsr([]) == 0.0


def _row(
    task: str,
    status: str,
    speedup: float | None,
    flags: list[str] | None = None,
    vs_compile: float | None = None,
    level: str | None = None,
) -> TaskRow:
    return TaskRow(
        task=task,
        level=level,
        status=status,
        correct=status == "correct",
        flags=flags or [],
        speedup=speedup,
        speedup_vs_compile=vs_compile,
    )


def test_flagged_correct_row_is_a_failure_in_every_metric():
    rows = [
        _row("a.py", "correct", 2.0),
        _row("b.py", "correct", 10.0, flags=["faster_than_roofline"]),
        _row("c.py", "incorrect", None),
        _row("d.py", "missing", None),
    ]
    s = summarize(rows)
    assert rows[1].correct and not rows[1].success
    assert (s.tasks, s.correct, s.correct_rate) == (4, 1, 0.25)
    assert s.fast_p == {"0": 0.25, "1": 0.25, "1.5": 0.25, "2": 0.0}
    assert s.amsr == pytest.approx(2.0 / 4)
    assert s.geomean_speedup == pytest.approx(2.0)
    # no torch.compile time on any success: the vs-compile metrics are absent
    assert s.fast_p_vs_compile == {} and s.amsr_vs_compile is None and s.geomean_speedup_vs_compile is None


def test_table_says_a_flagged_correct_row_is_not_a_success():
    """Issue 29, item 7: the table said `correct` beside a flag; only its colour told them apart."""
    from io import StringIO

    from rich.console import Console

    from kernelsmith.suite.table import rows_table

    rows = [_row("honest.py", "correct", 1.5), _row("cheat.py", "correct", 9.0, flags=["torch_compute_op"])]
    console = Console(file=StringIO(), width=300, color_system=None)
    console.print(rows_table(BenchReport.build("suite", "sol", "cuda", None, rows, skipped=[])))
    lines = console.file.getvalue().splitlines()
    cheat = next(line for line in lines if "cheat.py" in line)
    assert "correct, flagged" in cheat and "torch_compute_op" in cheat
    assert "flagged" not in next(line for line in lines if "honest.py" in line)
    data = json.loads(BenchReport.build("suite", "sol", "cuda", None, rows, skipped=[]).to_json())
    assert [r["success"] for r in data["rows"]] == [True, False]  # bench --json's rows carry the rule


def test_table_says_cpu_speedups_are_relative_only():
    """Issue 29, item 10: CPU speedups were shown without a word that they are only relative."""
    from io import StringIO

    from rich.console import Console

    from kernelsmith.suite.table import report_lines, rows_table

    def text(device: str) -> str:
        report = BenchReport.build("suite", "sol", device, None, [_row("a.py", "correct", 5e-4)], [])
        console = Console(file=StringIO(), width=300, color_system=None)
        console.print(rows_table(report))
        return console.file.getvalue() + "\n".join(report_lines(report))

    assert "speedups: a CPU figure (Triton runs interpreted there): relative only, not a GPU speedup" in text("cpu")
    assert "not a GPU speedup" not in text("cuda")
    # The summary's terms are said once under it: AMSR was printed with nothing saying what it is.
    assert text("cuda").count("AMSR: mean speedup over all tasks, a failure or a speedup below 1x counted as 0") == 1


def test_vs_compile_metrics_and_levels_in_json():
    rows = [
        _row("level1/a.py", "correct", 2.0, vs_compile=1.2, level="level1"),
        _row("level1/b.py", "correct", 3.0, vs_compile=0.8, level="level1"),
        _row("level10/c.py", "runtime_error", None, level="level10"),
        _row("level2/d.py", "correct", 1.0, vs_compile=None, level="level2"),
    ]
    report = BenchReport.build("suite", "sol", "cuda", None, rows, skipped=["helpers.py"])
    s = report.summary
    assert s.fast_p_vs_compile == pytest.approx({"0": 0.5, "1": 0.25, "1.5": 0.0, "2": 0.0})
    assert s.amsr_vs_compile == pytest.approx(1.2 / 4)
    assert s.geomean_speedup_vs_compile == pytest.approx(math.sqrt(1.2 * 0.8))
    assert list(report.levels) == ["level1", "level2", "level10"]
    assert report.levels["level1"].correct_rate == 1.0 and report.levels["level10"].correct == 0
    assert report.levels["level2"].amsr_vs_compile is None  # its only success has no compile time
    line = report.to_json()
    assert "\n" not in line
    data = json.loads(line)
    assert data["tasks"] == 4 and data["correct_rate"] == 0.75 and data["fast_p"]["1"] == 0.5
    assert data["amsr"] == pytest.approx((2.0 + 3.0 + 1.0) / 4)
    assert data["levels"]["level1"]["tasks"] == 2 and len(data["rows"]) == 4
    assert data["skipped"] == ["helpers.py"] and data["device"] == "cuda"


# -- discovery ----------------------------------------------------------------------------


def _copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)


def test_discovery_finds_tasks_and_levels(tmp_path, case):
    root = tmp_path / "KernelBench"
    _copy(case("rowsum_task"), root / "level2" / "3_rowsum.py")
    _copy(case("elementwise_task"), root / "level1" / "1_x.py")
    _copy(case("matmul_task"), root / "Level10" / "2_matmul.py")
    _copy(case("matmul_task"), root / "extra" / "mm.py")
    _copy(case("not_a_task"), root / "level1" / "helpers.py")
    (root / "level1" / "__init__.py").write_text("")
    (root / "level1" / "broken.py").write_text("def (:\n")
    scan = scan_suite(root)
    assert [(t.rel_path, t.level) for t in scan.tasks] == [
        ("Level10/2_matmul.py", "level10"),
        ("extra/mm.py", None),
        ("level1/1_x.py", "level1"),
        ("level2/3_rowsum.py", "level2"),
    ]
    assert scan.skipped == ["level1/__init__.py", "level1/broken.py", "level1/helpers.py"]
    # the suite directory itself named levelN gives its level to every task
    assert [t.level for t in scan_suite(root / "level2").tasks] == ["level2"]
    assert scan_suite(root / "extra").tasks[0].level is None
    with pytest.raises(UserError):
        scan_suite(tmp_path / "nowhere")


# -- a real CPU run -------------------------------------------------------------------------


def _shrink(source: str) -> str:
    """Stands in for a CPU-size transform: fewer rows for the elementwise and rowsum tasks."""
    return source.replace("M, N = 64, ", "M, N = 16, ")


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory, cpu_pool, case):
    root = tmp_path_factory.mktemp("bench")
    suite, solutions = root / "KernelBench", root / "solutions"
    layout = {  # task path: (task case, solution case or None)
        "level1/1_elementwise.py": ("elementwise_task", "elementwise_triton"),
        "level1/2_rowsum.py": ("rowsum_task", "rowsum_triton"),
        "level2/1_rowsum_wrong.py": ("rowsum_task", "rowsum_off_by_one"),
        "level2/2_matmul.py": ("matmul_task", None),
        "level2/3_matmul.py": ("matmul_task", "no_model_new"),
        "level2/4_broken.py": ("elementwise_task", "elementwise_triton"),
    }
    for rel, (task_case, sol_case) in layout.items():
        _copy(case(task_case), suite / rel)
        if sol_case:
            _copy(case(sol_case), solutions / rel)
    # statically a task, but it fails when the evaluator loads it
    broken = suite / "level2/4_broken.py"
    broken.write_text(broken.read_text() + "\nraise RuntimeError('this task is broken')\n")
    _copy(case("not_a_task"), suite / "level1" / "util.py")
    seen: list[TaskRow] = []
    report = run_bench(suite, solutions, cpu_pool, transform=_shrink, on_result=seen.append)
    return report, seen, suite


def test_bench_statuses(bench_run):
    report, seen, _ = bench_run
    status = {r.task: r.status for r in report.rows}
    assert status == {
        "level1/1_elementwise.py": "correct",
        "level1/2_rowsum.py": "correct",
        "level2/1_rowsum_wrong.py": "incorrect",
        "level2/2_matmul.py": "missing",
        "level2/3_matmul.py": "not_a_candidate",
        "level2/4_broken.py": "task_error",
    }
    assert [r.task for r in report.rows] == sorted(status)  # suite order, whatever the completion order
    assert sorted(r.task for r in seen) == sorted(status)  # on_result saw every row once
    assert report.skipped == ["level1/util.py"] and report.device == "cpu"
    rows = {r.task: r for r in report.rows}
    assert "this task is broken" in rows["level2/4_broken.py"].error
    assert "no solution file" in rows["level2/2_matmul.py"].error
    assert rows["level2/1_rowsum_wrong.py"].error and len(rows["level2/1_rowsum_wrong.py"].error) <= 300
    for r in (rows["level1/1_elementwise.py"], rows["level1/2_rowsum.py"]):
        assert r.speedup is not None and r.speedup > 0 and r.candidate_ms and r.reference_ms
        assert r.speedup_vs_compile is None and r.compile_ms is None  # torch.compile is off on the CPU


def test_bench_metrics(bench_run):
    report, _, _ = bench_run
    s = report.summary
    assert (s.tasks, s.correct) == (6, 2)
    assert s.correct_rate == pytest.approx(2 / 6)
    assert s.fast_p["0"] == s.correct_rate
    speedups = [r.speedup for r in report.rows if r.success]
    assert s.amsr == pytest.approx(sum(x for x in speedups if x >= 1) / 6)
    assert s.geomean_speedup == pytest.approx(math.sqrt(speedups[0] * speedups[1]))
    assert s.fast_p_vs_compile == {} and s.amsr_vs_compile is None
    assert report.levels["level1"].correct_rate == 1.0 and report.levels["level2"].correct == 0
    assert json.loads(report.to_json())["fast_p"]["0"] == pytest.approx(2 / 6)


def test_bench_applies_the_transform(bench_run):
    report, _, suite = bench_run
    rows = {r.task: r for r in report.rows}
    for rel in ("level1/1_elementwise.py", "level1/2_rowsum.py", "level2/1_rowsum_wrong.py"):
        source = (suite / rel).read_text()
        assert _shrink(source) != source
        # the hash the judge reports is that of the shrunk task, not of the file on disk
        assert rows[rel].task_hash == Task.from_source(_shrink(source)).hash != Task.from_source(source).hash


def test_bench_rejects_missing_solutions_dir(tmp_path, cpu_pool, case):
    _copy(case("rowsum_task"), tmp_path / "suite" / "t.py")
    with pytest.raises(UserError, match="solutions directory"):
        run_bench(tmp_path / "suite", tmp_path / "nope", cpu_pool)


def test_roofline_fraction_is_floor_over_time_and_in_the_json():
    row = TaskRow(task="t.py", status="correct", correct=True, candidate_ms=0.4, floor_ms=0.3)
    assert row.roofline_fraction == pytest.approx(0.75)
    assert json.loads(row.model_dump_json())["roofline_fraction"] == pytest.approx(0.75)
    assert TaskRow(task="t.py", status="correct", candidate_ms=0.4).roofline_fraction is None  # CPU: no floor


# -- what reaches the backend (a recording stand-in: nothing is evaluated) --------------------


class RecordingBackend:
    """Records each submitted (task, candidate) and answers "correct" at 1.0x."""

    def __init__(self) -> None:
        self.submitted: list[tuple[Task, object]] = []

    def submit(self, task, candidate, options=None) -> Future:
        from kernelsmith.evaluate.result import EvalResult, Status

        self.submitted.append((task, candidate))
        fut: Future = Future()
        fut.set_result(EvalResult(status=Status.correct, correct=True, speedup=1.0, candidate_ms=1.0, device="cpu"))
        return fut

    def hardware(self) -> Future:
        fut: Future = Future()
        fut.set_result({"device": "cpu"})
        return fut


def _with_bom(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_bytes(b"\xef\xbb\xbf" + src.read_bytes())


def test_bench_reads_task_and_solution_saved_with_a_byte_order_mark(tmp_path, case):
    _with_bom(case("rowsum_task"), tmp_path / "suite" / "t.py")
    _with_bom(case("rowsum_triton"), tmp_path / "solutions" / "t.py")
    backend = RecordingBackend()
    report = run_bench(tmp_path / "suite", tmp_path / "solutions", backend, transform=_shrink)
    assert [(r.task, r.status) for r in report.rows] == [("t.py", "correct")] and report.skipped == []
    ((task, candidate),) = backend.submitted
    assert task.source == _shrink(case("rowsum_task").read_text())
    assert candidate.source == case("rowsum_triton").read_text()


def test_a_folder_without_task_files_is_refused(tmp_path, case):
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match=r"empty holds no task files \(a task file defines Model and get_inputs\)$"):
        run_bench(tmp_path / "empty", tmp_path / "empty", RecordingBackend())
    _copy(case("not_a_task"), tmp_path / "helpers" / "util.py")
    with pytest.raises(UserError, match="get_inputs\\): 1 .py file that is not one$"):
        run_bench(tmp_path / "helpers", tmp_path / "empty", RecordingBackend())


def test_bench_small_evaluates_no_task_at_full_size(tmp_path, case):
    """--small cuts each task to its CPU_SIZES; a task that declares none (or a bad one) is a
    task_error that says so, not evaluated at full size."""
    from kernelsmith.task_sizes import small_source

    suite, solutions = tmp_path / "suite", tmp_path / "solutions"
    softmax = REPO / "examples" / "suite" / "softmax.py"
    _copy(softmax, suite / "softmax.py")
    _copy(case("rowsum_task"), suite / "rowsum.py")  # no CPU_SIZES
    (suite / "bad.py").write_text(softmax.read_text().replace('CPU_SIZES = {"ROWS"', 'CPU_SIZES = {"NOPE": 1, "ROWS"'))
    for name in ("softmax.py", "rowsum.py", "bad.py"):
        _copy(case("rowsum_triton"), solutions / name)
    backend = RecordingBackend()
    report = run_bench(suite, solutions, backend, transform=small_source)
    rows = {r.task: (r.status, r.error) for r in report.rows}
    assert rows["softmax.py"] == ("correct", None)
    assert rows["rowsum.py"] == ("task_error", "declares no CPU_SIZES, so --small cannot shrink it")
    assert rows["bad.py"][0] == "task_error" and rows["bad.py"][1].startswith(
        "cannot shrink it: CPU_SIZES names 'NOPE'"
    )
    assert [task.source for task, _ in backend.submitted] == [small_source(softmax.read_text())]


def test_two_task_files_of_one_name_get_distinct_names(tmp_path, case):
    """a/task.py and b/task.py: each named by its path in the suite, in bench's evaluations and in
    evolve-suite's stored runs (what `runs`, summaries, reports and exported data show)."""
    from kernelsmith.evolve.run import evolve_config
    from kernelsmith.evolve.store import RunStore
    from kernelsmith.suite.evolve_suite import evolve_suite

    suite, seeds = tmp_path / "suite", tmp_path / "seeds"
    for folder, task_case in (("a", "rowsum_task"), ("b", "elementwise_task")):
        _copy(case(task_case), suite / folder / "task.py")
        _copy(case("rowsum_triton"), seeds / folder / "task.py")
    assert [st.name for st in scan_suite(suite).tasks] == ["a/task", "b/task"]
    backend = RecordingBackend()
    run_bench(suite, seeds, backend)
    assert [task.name for task, _ in backend.submitted] == ["a/task", "b/task"]

    cfg = evolve_config(None, {"iterations": 0, "evaluation": {"device": "cpu"}}, "tune")
    evolve_suite(suite, seeds, tmp_path / "runs", cfg, False, RecordingBackend(), lambda text: None)
    for name in ("a/task", "b/task"):
        store = RunStore.open_readonly(tmp_path / "runs" / name)
        try:
            assert store.get_meta("task_name") == name
        finally:
            store.close()
        assert json.loads((tmp_path / "runs" / name / "summary.json").read_text())["task"] == name
