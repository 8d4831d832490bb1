"""flashinfer-trace's own definitions in and back out (issue 55), on a fixture written in their style.

tests/cases/flashinfer_upstream holds definitions as flashinfer-trace writes them: references without a
final newline, var batch axes (rmsnorm_h64, fused_add_rmsnorm_h64), a definition without workloads
(gemm_n32_k64, as most of the dataset's are), one whose workload's safetensors file is not there
(embedding_v64_d16: a git checkout of flashinfer-trace keeps them on Hugging Face), one that flashinfer-bench judges by its samples' distribution
(top_k_sampling_from_probs_v64), one it judges by a share of matched elements (moe_fp8_block_scale_...),
and one whose token ids are a safetensors file too large to write into a task (embedding_v64_d8). Each
imported task goes back into the dataset as the Definition and workload it came from; every reference
runs at every workload.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import REPO

pytest.importorskip("flashinfer_bench")

from flashinfer_bench.bench.utils import gen_inputs, load_safetensors  # noqa: E402
from flashinfer_bench.compile import BuilderRegistry  # noqa: E402
from flashinfer_bench.data import TraceSet  # noqa: E402

from kernelsmith.fib.exporting import export_fib  # noqa: E402
from kernelsmith.fib.importing import import_fib  # noqa: E402

UPSTREAM = REPO / "tests/cases/flashinfer_upstream"
IMPORTED = ["embedding_v64_d8", "fused_add_rmsnorm_h64", "rmsnorm_h64"]


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> tuple[Path, object]:
    out = tmp_path_factory.mktemp("upstream") / "tasks"
    return out, import_fib(UPSTREAM, out)


def test_import_goes_past_what_it_cannot_take_and_says_why_once(imported):
    out, done = imported
    assert sorted({t.definition for t in done.tasks}) == IMPORTED
    assert set(done.skipped) == {
        "gemm_n32_k64",
        "embedding_v64_d16",
        "top_k_sampling_from_probs_v64",
        "moe_fp8_block_scale_topk1_e2_h16",
    }
    assert done.skipped["gemm_n32_k64"] == "no workload file (workloads/gemm/gemm_n32_k64.jsonl)"
    assert "input_ids: its safetensors file blob/workloads/embedding" in done.skipped["embedding_v64_d16"]
    assert "distribution of its samples" in done.skipped["top_k_sampling_from_probs_v64"]
    assert "share of its elements" in done.skipped["moe_fp8_block_scale_topk1_e2_h16"]
    manifest = json.loads((out / "import.json").read_text())
    assert manifest["skipped"] == done.skipped


def test_cli_says_each_definition_left_out_on_one_line(tmp_path: Path):
    p = subprocess.run(
        [sys.executable, "-m", "kernelsmith", "import-fib", UPSTREAM, "--out", tmp_path / "t"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    said = [line for line in p.stdout.splitlines() if "not imported" in line]
    assert len(said) == 4 and all(line.startswith("definition ") for line in said), p.stdout
    p = subprocess.run(  # asked for by name, a definition without workloads leaves nothing to import
        [sys.executable, "-m", "kernelsmith", "import-fib", UPSTREAM, "--out", tmp_path / "u"]
        + ["--definition", "gemm_n32_k64"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1 and "no workload file" in lines[0], p.stderr


def test_each_imported_task_goes_back_into_the_dataset_unchanged(imported, tmp_path: Path):
    out, done = imported
    dataset = tmp_path / "dataset"
    shutil.copytree(UPSTREAM, dataset)
    for t in done.tasks:
        report = export_fib([out / t.file], dataset)
        assert [d["name"] for d in report.definitions] == [t.definition]
        assert report.written == [], report.written  # the dataset's own Definition and workload, as they are
    for path in UPSTREAM.rglob("*"):
        if path.is_file():
            assert (dataset / path.relative_to(UPSTREAM)).read_bytes() == path.read_bytes(), path


def test_every_reference_runs_at_every_workload(imported, tmp_path: Path):
    """The round trip's set, loaded by flashinfer-bench: each Definition's reference, built by its own
    builder, runs at each of its workloads (on the CPU at these sizes) with the outputs it declares."""
    out, done = imported
    back = tmp_path / "back"
    export_fib([out / t.file for t in done.tasks], back)
    ts = TraceSet.from_path(str(back))
    assert sorted(ts.definitions) == IMPORTED
    for name, d in ts.definitions.items():
        reference = BuilderRegistry.get_instance().build_reference(d)
        for w in ts.workloads[name]:
            inputs = gen_inputs(d, w.workload, "cpu", load_safetensors(d, w.workload, ts.root))
            got = reference(*inputs)
            got = got if isinstance(got, tuple) else (got,)
            shapes = d.get_output_shapes(w.workload.axes)
            assert [list(g.shape) for g in got] == [list(s or []) for s in shapes], (name, w.workload.axes)
            assert [g.dtype for g in got] == d.torch_output_dtypes
            assert all(torch.isfinite(g.float()).all() for g in got)


CANDIDATE = """
import torch


class ModelNew(torch.nn.Module):
    def forward(self, hidden_states, weight):
        x = hidden_states.float()
        y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * weight.float()
        return y.to(hidden_states.dtype)
"""


def _stored_run(run_dir: Path, task_source: str, name: str) -> None:
    """A run of one program whose verdict is a success (made here: what export reads is the store)."""
    from kernelsmith.evaluate import EvalResult, Status
    from kernelsmith.evaluate.result import TrialReport
    from kernelsmith.evolve.program import Program
    from kernelsmith.evolve.store import RunStore

    verdict = EvalResult(
        status=Status.correct,
        correct=True,
        trials=[TrialReport(seed=0, ok=True, max_abs_err=0.03125, max_rel_err=0.0078125)],
        candidate_ms=1.0,
        reference_ms=2.0,
        speedup=2.0,
    )
    store = RunStore(run_dir)
    try:
        store.set_meta("task_source", task_source)
        store.set_meta("task_name", name)
        store.add(Program(iteration=0, island=0, operator="seed", code=CANDIDATE, status="").with_verdict(verdict))
    finally:
        store.close()


def test_a_small_run_goes_back_as_a_trace_on_the_datasets_own_workload(imported, tmp_path: Path):
    from kernelsmith.task_sizes import shrink

    out, done = imported
    (task,) = [t for t in done.tasks if t.definition == "rmsnorm_h64" and t.axes == {"batch_size": 300}]
    _stored_run(tmp_path / "run", shrink((out / task.file).read_text()), Path(task.file).stem)
    dataset = tmp_path / "dataset"
    shutil.copytree(UPSTREAM, dataset)
    report = export_fib([tmp_path / "run"], dataset)
    assert [s["trace"] for s in report.solutions] == ["PASSED"]
    workloads = "workloads/rmsnorm/rmsnorm_h64.jsonl"
    assert (dataset / workloads).read_bytes() == (UPSTREAM / workloads).read_bytes()  # no made-up workload
    (trace,) = TraceSet.from_path(str(dataset)).traces["rmsnorm_h64"]
    assert trace.workload.uuid == task.workload and trace.workload.axes == {"batch_size": 300}
    assert trace.evaluation is not None and "judged at batch_size=8" in trace.evaluation.log
    assert "not at this workload's batch_size=300" in (report.solutions[0]["note"] or "")


def test_the_tolerance_export_says_serves_a_bf16_trace(imported, tmp_path: Path):
    """A bf16 kernel is a rounding step off (0.03125 near 4): flashinfer-bench's apply() defaults (1e-2, 1e-5)
    never serve it, so the export says what does."""
    out, done = imported
    (task,) = [t for t in done.tasks if t.definition == "rmsnorm_h64" and t.axes == {"batch_size": 7}]
    _stored_run(tmp_path / "run", (out / task.file).read_text(), Path(task.file).stem)
    (solution,) = export_fib([tmp_path / "run"], tmp_path / "set").solutions
    assert solution["apply"] == {"max_atol": 0.032, "max_rtol": 0.0079}


def test_an_imported_task_names_its_blob_relative_and_moves_whole(imported, tmp_path: Path, monkeypatch):
    from kernelsmith.fib.probe import load
    from kernelsmith.fib.task_text import BLOBS_ENV
    from kernelsmith.task import load_module

    out, done = imported
    (task,) = [t for t in done.tasks if t.definition == "embedding_v64_d8"]
    assert task.blobs and all(not Path(b).is_absolute() for b in task.blobs)
    moved = tmp_path / "elsewhere"
    shutil.copytree(out, moved)
    text = (moved / task.file).read_text()
    assert str(out) not in text and str(out.resolve()) not in text  # no path of this machine
    ts = TraceSet.from_path(str(UPSTREAM))
    d, (w,) = ts.definitions[task.definition], ts.workloads[task.definition]
    want = load_safetensors(d, w.workload, UPSTREAM)["input_ids"]
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(BLOBS_ENV, raising=False)
    in_place = load_module(text, moved / task.file, "_ks_test_moved_task")  # run where it lies: beside it
    sys.modules.pop("_ks_test_moved_task")
    assert torch.equal(in_place.get_inputs()[0], want)
    copy = load(text)  # a copy elsewhere, as the evaluator's sandbox runs it: the variable says where
    with pytest.raises(FileNotFoundError, match=BLOBS_ENV):
        copy.get_inputs()
    monkeypatch.setenv(BLOBS_ENV, str(moved))
    assert torch.equal(copy.get_inputs()[0], want)
    monkeypatch.delenv(BLOBS_ENV)
    dataset = tmp_path / "dataset"  # and it goes back into the dataset from where it was moved
    shutil.copytree(UPSTREAM, dataset)
    assert export_fib([moved / task.file], dataset).written == []
