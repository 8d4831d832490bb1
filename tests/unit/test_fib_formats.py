"""flashinfer-bench in and out, without the evaluator: the committed fixture in flashinfer-trace's format
(tests/cases/flashinfer_trace: an RMSNorm and a GEMM definition, two workloads each, three Solutions)
imports into tasks and candidates; bad inputs are one line each; what a task cannot say in the format
is one line; a verdict maps onto a Trace's statuses; an export into a dataset checks before it writes."""

from __future__ import annotations

import importlib.util
import json
import shutil
import uuid
from pathlib import Path

import pytest
import torch

pytest.importorskip("flashinfer_bench")

from flashinfer_bench.data import EvaluationStatus, TraceSet  # noqa: E402

from kernelsmith.errors import UserError  # noqa: E402
from kernelsmith.evaluate.result import EvalResult, Status, TrialReport  # noqa: E402
from kernelsmith.evaluate.verdict import Flag  # noqa: E402
from kernelsmith.fib.exporting import export_fib  # noqa: E402
from kernelsmith.fib.importing import import_fib  # noqa: E402
from kernelsmith.fib.trace_out import evaluation  # noqa: E402

FIXTURE = Path(__file__).resolve().parents[1] / "cases" / "flashinfer_trace"


def load(path: Path):
    spec = importlib.util.spec_from_file_location(f"fib_test_{uuid.uuid4().hex[:8]}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def copy_fixture(tmp_path: Path) -> Path:
    root = tmp_path / "dataset"
    shutil.copytree(FIXTURE, root)
    return root


def test_the_fixture_is_flashinfer_trace_as_flashinfer_bench_loads_it():
    ts = TraceSet.from_path(str(FIXTURE))
    assert sorted(ts.definitions) == ["gemm_n64_k128", "rmsnorm_h128"]
    assert {name: len(w) for name, w in ts.workloads.items()} == {"gemm_n64_k128": 2, "rmsnorm_h128": 2}
    assert len(ts.solutions["gemm_n64_k128"]) == 2 and len(ts.solutions["rmsnorm_h128"]) == 1


def test_import_writes_a_task_per_workload_and_a_candidate_per_solution(tmp_path: Path):
    out = tmp_path / "tasks"
    done = import_fib(FIXTURE, out)
    assert sorted(t.file for t in done.tasks) == [
        "gemm_n64_k128_M3.py",
        "gemm_n64_k128_M33.py",
        "rmsnorm_h128_batch_size16.py",
        "rmsnorm_h128_batch_size5.py",
    ]
    by_name = {s.name: s for s in done.solutions}
    assert by_name["rmsnorm_h128_triton_rows"].file and by_name["gemm_n64_k128_triton_tiles"].file
    assert "tvm-ffi" in (by_name["gemm_n64_k128_cuda_tvm_ffi"].why or "")  # listed, not a candidate
    assert json.loads((out / "import.json").read_text())["tasks"][0]["workload"]
    # The scalar eps is the constructor's argument; the safetensors weight is written into the task.
    task = load(out / "rmsnorm_h128_batch_size5.py")
    assert task.get_init_inputs() == [1e-06] and task.BATCH_SIZE == 5 and not hasattr(task, "CPU_SIZES")
    torch.manual_seed(0)
    x, w = task.get_inputs()
    assert x.shape == (5, 128) and x.dtype == torch.bfloat16 and w.dtype == torch.bfloat16
    blob = FIXTURE / "blob/workloads/rmsnorm/rmsnorm_h128/rmsnorm_h128_3f7c2a9e-5b1d-4c6e-9a08-2d4b6f1e7c31.safetensors"
    from safetensors.torch import load_file

    assert torch.equal(w, load_file(str(blob))["weight"])
    # The imported Model is the Definition's reference, called on the inputs as flashinfer-bench calls it.
    assert torch.equal(task.Model(1e-06)(x, w), task.run(x, w, 1e-06))
    assert load(out / "gemm_n64_k128_M33.py").CPU_SIZES == {"M": 8}


def _break(root: Path, what: str) -> None:
    if what == "workload file":
        (root / "workloads/gemm/gemm_n64_k128.jsonl").unlink()
    elif what == "dtype":
        path = root / "definitions/gemm/gemm_n64_k128.json"
        path.write_text(path.read_text().replace('"float16"', '"float64"', 1))
    elif what == "entry point":
        path = root / "solutions/fixture/rmsnorm/rmsnorm_h128/rmsnorm_h128_triton_rows.json"
        path.write_text(path.read_text().replace("main.py::run", "main.py::rmsnorm"))
    elif what == "safetensors file":
        next((root / "blob").rglob("*.safetensors")).unlink()
    elif what in ("tensor key", "tensor shape", "not safetensors"):
        from safetensors.torch import save_file

        blob = next((root / "blob").rglob("*.safetensors"))
        if what == "not safetensors":
            blob.write_bytes(b"not a safetensors file")
        else:
            key, shape = ("bias", 128) if what == "tensor key" else ("weight", 64)
            save_file({key: torch.ones(shape, dtype=torch.bfloat16)}, str(blob))


@pytest.mark.parametrize(
    "what, needle",
    [
        ("workload file", "gemm_n64_k128: no workload file (workloads/gemm/gemm_n64_k128.jsonl)"),
        ("dtype", "float64"),
        ("entry point", "defines no rmsnorm"),
        ("safetensors file", "safetensors file"),
        ("tensor key", "Missing key 'weight'"),  # flashinfer-bench's own load_safetensors checks these
        ("tensor shape", "'weight' expected [128], got [64]"),
        ("not safetensors", "workload 3f7c2a9e"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(tmp_path: Path, what: str, needle: str):
    root = copy_fixture(tmp_path)
    _break(root, what)
    out = tmp_path / "tasks"
    with pytest.raises(UserError) as err:  # a definition without (whole) workloads: an error only when it is all
        import_fib(root, out, {"workload file": ["gemm_n64_k128"], "safetensors file": ["rmsnorm_h128"]}.get(what))
    assert needle in str(err.value) and "\n" not in str(err.value)
    assert not out.exists()


BAD_TASKS = {
    "float64": "x = torch.randn(4, 8, dtype=torch.float64)",
    "uint8": "x = torch.randint(0, 255, (4, 8), dtype=torch.uint8)",
    "strided": "x = torch.randn(8, 4).t()",
}
TASK = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return {forward}


def get_inputs():
    {inputs}
    return [x]


def get_init_inputs():
    return []
'''


def _task(tmp_path: Path, name: str, inputs: str, forward: str = "x * 2") -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(TASK.format(inputs=inputs, forward=forward))
    return path


@pytest.mark.parametrize(
    "name, needle",
    [
        ("float64", "is float64, which flashinfer-bench has no dtype for"),
        ("uint8", "is uint8"),
        ("strided", "not contiguous"),
        ("data_dependent", "its shapes depend on its values"),
    ],
)
def test_what_the_format_cannot_hold_is_one_line_and_left_out_whole(tmp_path: Path, name: str, needle: str):
    if name == "data_dependent":
        bad = _task(tmp_path, name, "x = torch.randn(4, 8)", forward="x[x > 0]")
    else:
        bad = _task(tmp_path, name, BAD_TASKS[name])
    out = tmp_path / "fib"
    with pytest.raises(UserError) as err:
        export_fib([bad], out)
    assert needle in str(err.value) and not out.exists()
    good = _task(tmp_path, "double", "x = torch.randn(4, 8)")
    report = export_fib([good, bad], out)
    assert [d["name"] for d in report.definitions] == ["double"]
    assert report.skipped and needle in report.skipped[0][1]
    assert sorted(p.name for p in (out / "definitions").rglob("*.json")) == ["double.json"]


def _result(status: Status, flags=(), message: str | None = None) -> EvalResult:
    trial = TrialReport(seed=1, ok=status is Status.correct, max_abs_err=0.002, max_rel_err=0.01, message=message)
    return EvalResult(
        status=status,
        correct=status is Status.correct,
        speedup=1.5,
        candidate_ms=0.02,
        reference_ms=0.03,
        flags=list(flags),
        device="cuda",
        gpu_name="NVIDIA H200",
        torch_version="2.13.0",
        trials=[trial],
        speedup_basis="device_time",
        timing_method="cuda_graph",
        error=None if status is Status.correct else "why",
    )


@pytest.mark.parametrize(
    "result, status",
    [
        (_result(Status.correct), EvaluationStatus.PASSED),
        (_result(Status.correct, [Flag.torch_compute_op]), EvaluationStatus.RUNTIME_ERROR),
        (_result(Status.incorrect, message="output 0: shape (2,) but expected (3,)"), EvaluationStatus.INCORRECT_SHAPE),
        (
            _result(Status.incorrect, message="output 0: dtype torch.float32 but expected torch.bfloat16"),
            EvaluationStatus.INCORRECT_DTYPE,
        ),
        (_result(Status.incorrect, message="3 of 8 elements off"), EvaluationStatus.INCORRECT_NUMERICAL),
        (_result(Status.compile_error), EvaluationStatus.COMPILE_ERROR),
        (_result(Status.runtime_error), EvaluationStatus.RUNTIME_ERROR),
        (_result(Status.timeout), EvaluationStatus.TIMEOUT),
        (_result(Status.rejected), EvaluationStatus.RUNTIME_ERROR),
    ],
)
def test_a_verdict_maps_onto_a_trace_status(result: EvalResult, status: EvaluationStatus):
    e = evaluation(result, 1_700_000_000.0)
    assert e.status is status
    assert e.environment.hardware == "NVIDIA H200" and e.environment.libs["torch"] == "2.13.0"
    if status is EvaluationStatus.PASSED:
        assert e.performance is not None and e.correctness is not None
        assert (e.performance.latency_ms, e.performance.reference_latency_ms, e.performance.speedup_factor) == (
            0.02,
            0.03,
            1.5,
        )
        assert e.correctness.max_absolute_error == 0.002
    if result.flags:
        assert "torch_compute_op" in e.log  # a flagged kernel is never PASSED: apply() never serves it


def test_an_export_into_a_dataset_adds_and_never_overwrites(tmp_path: Path):
    root = copy_fixture(tmp_path)
    imported = tmp_path / "tasks"
    import_fib(FIXTURE, imported)
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    # An imported task exports as it came: into its own dataset, nothing changes.
    report = export_fib([imported / "rmsnorm_h128_batch_size5.py", imported / "gemm_n64_k128_M3.py"], root)
    assert {d["name"] for d in report.definitions} == {"rmsnorm_h128", "gemm_n64_k128"}
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before
    # A Definition of the same name that says something else is refused, and nothing is written.
    other = _task(tmp_path, "rmsnorm_h128", "x = torch.randn(4, 8)")
    with pytest.raises(UserError, match="holds another Definition named rmsnorm_h128"):
        export_fib([other, _task(tmp_path, "double", "x = torch.randn(4, 8)")], root)
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before
    # A folder of other files is not a dataset.
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match="neither empty nor a flashinfer-bench dataset"):
        export_fib([other], tmp_path / "mine")


def test_a_large_safetensors_input_is_copied_and_read_from_the_copy(tmp_path: Path):
    from safetensors.torch import save_file

    root = copy_fixture(tmp_path)
    big = torch.randn(40, 128, dtype=torch.bfloat16)
    save_file({"input": big}, str(root / "blob/big.safetensors"))
    path = root / "workloads/rmsnorm/rmsnorm_h128.jsonl"
    first, second = path.read_text().splitlines()
    line = json.loads(second)
    line["workload"]["axes"]["batch_size"] = 40
    line["workload"]["inputs"]["input"] = {"type": "safetensors", "path": "blob/big.safetensors", "tensor_key": "input"}
    path.write_text(first + "\n" + json.dumps(line) + "\n")
    out = tmp_path / "tasks"
    import_fib(root, out, ["rmsnorm_h128"])
    (copied,) = (out / "blob").rglob("*.safetensors")  # 5,120 elements: more than a task holds as a literal
    task = load(out / "rmsnorm_h128_batch_size40.py")  # run where it lies: the copy is beside it
    text = (out / "rmsnorm_h128_batch_size40.py").read_text()
    assert repr(copied.relative_to(out).as_posix()) in text and str(tmp_path) not in text
    assert torch.equal(task.get_inputs()[0], big)


def test_a_cpp_solution_with_the_torch_binding_is_built_by_load_inline_in_its_candidate():
    import ast

    from flashinfer_bench.data import Solution

    from kernelsmith.fib.candidate_text import candidate_text
    from kernelsmith.fib.layout import Dataset
    from kernelsmith.fib.task_text import input_idents

    d = Dataset.read(FIXTURE).definitions["gemm_n64_k128"]
    source = "#include <torch/extension.h>\n#include \"gemm.h\"\ntorch::Tensor gemm(torch::Tensor A, torch::Tensor B) { return A; }\n"
    spec = {
        "language": "cpp",
        "target_hardware": ["cpu"],
        "entry_point": "gemm.cpp::gemm",
        "binding": "torch",
        "destination_passing_style": False,
    }
    files = [{"path": "gemm.cpp", "content": source}, {"path": "gemm.h", "content": "#pragma once\n"}]
    s = Solution.model_validate(dict(name="gemm_cpp", definition=d.name, author="t", spec=spec, sources=files))
    text = candidate_text(d, s, input_idents(d))
    ast.parse(text)
    assert "load_inline(" in text and "_extension.gemm" in text and "class ModelNew" in text
    missing = s.model_copy(update={"spec": s.spec.model_copy(update={"entry_point": "gemm.cpp::matmul"})})
    with pytest.raises(UserError, match="gemm.cpp has no matmul"):
        candidate_text(d, missing, input_idents(d))


def test_a_random_input_is_drawn_as_flashinfer_bench_draws_it():
    """The task's get_inputs() writes out the calls of flashinfer-bench's own draw (a task runs where the
    library may be absent): the same values for the same seed, for each dtype either side knows."""
    from flashinfer_bench.bench.utils import _rand_tensor

    from kernelsmith.fib.dtypes import TORCH_OF_FIB, draw

    for name, dtype in TORCH_OF_FIB.items():
        torch.manual_seed(7)
        ours = eval(draw(name, "[3, 5]"), {"torch": torch})  # noqa: S307 - our own generated code
        torch.manual_seed(7)
        theirs = _rand_tensor([3, 5], dtype, torch.device("cpu"))
        assert ours.dtype == theirs.dtype and torch.equal(ours, theirs), name


def test_the_layout_is_the_one_flashinfer_bench_writes(tmp_path: Path):
    """Where flashinfer-bench's own TraceSet writes a workload and its blob, export-fib writes them too."""
    from kernelsmith.fib.layout import blob_path, workloads_path

    ts = TraceSet.from_path(str(FIXTURE))
    d = ts.definitions["rmsnorm_h128"]
    mine = TraceSet(root=tmp_path, definitions={d.name: d})
    written = mine.add_workload_blob_tensor(d.name, "u-1", {"weight": torch.ones(128)})
    assert written == blob_path(d.op_type, d.name, "u-1")
    mine.add_workload_traces([ts.workloads[d.name][0]])
    assert (tmp_path / workloads_path(d.op_type, d.name)).is_file()
