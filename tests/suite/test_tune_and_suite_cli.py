"""The tuner in the search loop without any LLM, and the suite commands (`bench`, `evolve-suite`),
run as a user runs them, on the CPU with small sizes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import REPO, case_path

KERNELSMITH = Path(sys.executable).parent / "kernelsmith"
SUITE = REPO / "examples" / "suite"
SEEDS = REPO / "examples" / "suite_seeds"


def ks(*args, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(KERNELSMITH), *map(str, args)], capture_output=True, text=True, timeout=timeout, cwd=REPO
    )


def last_json(p: subprocess.CompletedProcess) -> dict:
    assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-3000:])
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_tuner_alone_needs_no_llm_and_never_repeats_a_config(tmp_path):
    run_dir = tmp_path / "run"
    p = ks(
        "evolve",
        case_path("elementwise_task"),
        "--seed",
        case_path("elementwise_small_blocks"),
        "--mutator",
        "tune",
        "--iterations",
        "4",
        "--device",
        "cpu",
        "--run-dir",
        run_dir,
        "--json",
        "--llm-base-url",
        "http://127.0.0.1:9/v1",
    )  # nothing listens there: the tuner must not call it
    summary = last_json(p)
    assert summary["iterations_done"] == 4 and summary["prompt_tokens"] == 0
    rows = [json.loads(line) for line in ks("export", run_dir).stdout.splitlines()]
    assert [r["operator"] for r in rows] == ["seed"] + ["tune"] * 4
    configs = [json.dumps(r["config"], sort_keys=True) for r in rows]
    assert len(set(configs)) == 5, configs  # the seed's and four new ones
    assert all(r["messages"] is None and r["model"] is None for r in rows)
    for r in rows[1:]:  # only the block size changed: the interpreter ignores num_warps and num_stages
        changed = [(a, b) for a, b in zip(rows[0]["code"].splitlines(), r["code"].splitlines()) if a != b]
        assert len(changed) == 1 and "BLOCK = " in changed[0][1], changed
        assert list(r["config"]) == ["relu_mul_add_kernel.BLOCK"], r["config"]
    assert all(r["status"] == "correct" for r in rows), [(r["status"], r["error"]) for r in rows]
    assert summary["best"]["speedup"] >= rows[0]["speedup"]
    # the CPU's noise floor is measured: the seed evaluated three times, the spread of its times
    floor = summary["noise_floor"]
    assert floor["origin"] == "measured" and floor["method"] == "cpu_wall" and len(floor["times_ms"]) == 3
    times = floor["times_ms"]
    assert times[0] == rows[0]["eval"]["timing"]["median_ms"]
    assert abs(floor["relative"] - (max(times) - min(times)) / min(times)) < 1e-9


def test_tuner_alone_without_a_seed_is_one_line(tmp_path):
    p = ks(
        "evolve",
        case_path("elementwise_task"),
        "--mutator",
        "tune",
        "--iterations",
        "2",
        "--device",
        "cpu",
        "--run-dir",
        tmp_path / "run",
        timeout=120,
    )
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.strip().splitlines() == ["error: the tuner alone needs a starting program: give --seed"]


def test_tuner_with_a_broken_seed_says_why_and_leaves_no_run(tmp_path):
    seed = tmp_path / "seed.py"
    seed.write_text(case_path("elementwise_small_blocks").read_text().replace("tl.store(", "tl.stor("))
    args = ["evolve", case_path("elementwise_task"), "--seed", seed, "--mutator", "tune", "--iterations", "1"]
    p = ks(*args, "--device", "cpu", "--run-dir", tmp_path / "runs" / "r", "--quiet", timeout=300)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.strip().splitlines() == [
        "error: the tuner alone needs a correct starting program, and the seed (program #1) raises an error when "
        "run: InterpreterError: AttributeError(\"module 'triton.language' has no attribute 'stor'\"); fix the seed "
        "file and run the same command again"
    ]
    assert not (tmp_path / "runs" / "r").exists()
    assert ks("runs", tmp_path / "runs").stdout.startswith("no run directories below")


def small_suite(tmp_path: Path, names: list[str], seeds: list[str]) -> tuple[Path, Path]:
    suite, seed_dir = tmp_path / "suite", tmp_path / "seeds"
    suite.mkdir()
    seed_dir.mkdir()
    for name in names:
        shutil.copy(SUITE / f"{name}.py", suite / f"{name}.py")
    for name in seeds:
        shutil.copy(SEEDS / f"{name}.py", seed_dir / f"{name}.py")
    return suite, seed_dir


def test_bench_json_summary(tmp_path):
    suite, seeds = small_suite(tmp_path, ["row_sum", "softmax", "rmsnorm"], ["row_sum", "softmax"])
    # a task without CPU_SIZES: --small must not run it at full size, and says so in its row
    plain = (suite / "rmsnorm.py").read_text().replace('CPU_SIZES = {"TOKENS": 8, "HIDDEN": 1500}\n', "")
    (suite / "rmsnorm.py").write_text(plain)
    report = last_json(ks("bench", suite, "--solutions", seeds, "--device", "cpu", "--small", "--json"))
    for key in ("tasks", "correct_rate", "fast_p", "amsr", "geomean_speedup"):
        assert key in report, key
    assert report["tasks"] == 3
    assert report["correct_rate"] == 2 / 3
    assert set(report["fast_p"]) == {"0", "1", "1.5", "2"} and report["fast_p"]["0"] == 2 / 3
    statuses = {r["task"]: r["status"] for r in report["rows"]}
    assert statuses == {"row_sum.py": "correct", "softmax.py": "correct", "rmsnorm.py": "task_error"}
    assert report["rows"][0]["error"] == "declares no CPU_SIZES, so --small cannot shrink it"
    table = ks("bench", suite, "--solutions", seeds, "--device", "cpu", "--small", "--html", tmp_path / "bench.html")
    assert table.returncode == 0 and "2/3 correct" in table.stdout and "fast_1=" in table.stdout
    assert "rmsnorm.py: task_error: declares no CPU_SIZES, so --small cannot shrink it" in table.stdout
    assert "best so far:" in table.stdout and 'id="suite-chart"' in (tmp_path / "bench.html").read_text()


def test_evolve_suite_with_the_tuner_resumes_and_reports(tmp_path):
    suite, seeds = small_suite(tmp_path, ["row_sum", "gelu_gate_bias", "softmax"], ["row_sum", "gelu_gate_bias"])
    runs = tmp_path / "runs"
    args = [
        "evolve-suite",
        suite,
        "--seeds",
        seeds,
        "--runs-dir",
        runs,
        "--mutator",
        "tune",
        "--iterations",
        "2",
        "--device",
        "cpu",
        "--small",
    ]
    p = ks(*args)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "softmax.py: skipped" in p.stdout  # no seed, and the tuner cannot translate
    report = json.loads((runs / "suite_report.json").read_text())
    assert (runs / "suite_report.html").is_file() and (runs / "row_sum" / "report.html").is_file()
    page = (runs / "suite_report.html").read_text()  # its own page: each task's search, linked
    assert "<title>kernelsmith evolve-suite: " in page and '"report":"row_sum/report.html"' in page
    assert report["tasks"] == 3 and report["correct_rate"] == 2 / 3
    assert {r["task"]: r["status"] for r in report["rows"]}["softmax.py"] == "missing"
    for name in ("row_sum", "gelu_gate_bias"):
        summary = json.loads((runs / name / "summary.json").read_text())
        assert summary["iterations_done"] == 2
        assert (runs / "solutions" / f"{name}.py").read_text() == (runs / name / "best.py").read_text()
    # Asking for more rounds continues each run from where it stopped.
    again = last_json(ks(*args[:-5], "--iterations", "3", "--device", "cpu", "--small", "--json"))
    assert again["tasks"] == 3
    assert json.loads((runs / "row_sum" / "summary.json").read_text())["iterations_done"] == 3


def test_a_quiet_run_still_says_where_its_results_went(tmp_path):
    """Issue 40: `evolve --quiet` printed nothing at all, not even where best.py went."""
    run = tmp_path / "run"
    seed = REPO / "examples" / "suite_seeds" / "softmax.py"
    args = ["evolve", SUITE / "softmax.py", "--seed", seed, "--mutator", "tune", "--iterations", "0", "--small"]
    p = ks(*args, "--device", "cpu", "--run-dir", run, "--quiet", timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().splitlines() == [f"best: {run / 'best.py'}; summary: {run / 'summary.json'}"]
