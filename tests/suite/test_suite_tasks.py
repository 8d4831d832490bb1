"""The bundled task suite: every task has a seed, declares H200-sized inputs, and shrinks to CPU
sizes at which its seed is correct with no flags through the real evaluator (Triton interpreter)."""

from __future__ import annotations

import ast
import importlib.util
import sys
import textwrap

import pytest
import torch
from conftest import REPO

from kernelsmith.candidate import Candidate
from kernelsmith.evaluate import Status
from kernelsmith.task import Task
from kernelsmith.task_sizes import read_cpu_sizes, shrink, shrink_file, small_source

SUITE = REPO / "examples" / "suite"
SEEDS = REPO / "examples" / "suite_seeds"
TASKS = sorted(p.stem for p in SUITE.glob("*.py"))
RESULT_WAIT = 300.0

MB = 2**20
GB = 2**30


# --- shrink ---------------------------------------------------------------------------------------

SOURCE = textwrap.dedent('''\
    """A task."""
    import torch

    BATCH = 4096  # rows
    DIM: int = 8192
    OTHER = 1024
    EPS = 1e-5
    SCALE = BATCH * 2

    CPU_SIZES = {"BATCH": 16, "DIM": 64}


    def get_inputs():
        BATCH = 7  # a local, not the module constant
        return [torch.randn(BATCH, DIM)]
    ''')


def test_shrink_rewrites_only_the_named_constants():
    out = shrink(SOURCE)
    expected = SOURCE.replace("BATCH = 4096  # rows", "BATCH = 16  # rows").replace("DIM: int = 8192", "DIM: int = 64")
    assert out == expected
    assert "OTHER = 1024" in out and "BATCH = 7  # a local" in out and 'CPU_SIZES = {"BATCH": 16, "DIM": 64}' in out


def test_shrink_without_cpu_sizes_is_identity():
    src = SOURCE.replace('CPU_SIZES = {"BATCH": 16, "DIM": 64}\n', "")
    assert read_cpu_sizes(src) is None
    assert shrink(src) == src


def test_small_source_says_why_a_task_cannot_be_cut_to_cpu_sizes():
    assert small_source(SOURCE) == shrink(SOURCE)
    with pytest.raises(ValueError, match=r"^declares no CPU_SIZES, so --small cannot shrink it$"):
        small_source(SOURCE.replace('CPU_SIZES = {"BATCH": 16, "DIM": 64}\n', ""))
    with pytest.raises(ValueError, match=r"^cannot shrink it: CPU_SIZES names 'EPS', which is not"):
        small_source(SOURCE.replace('{"BATCH": 16, "DIM": 64}', '{"EPS": 1}'))


def test_load_task_small_names_the_file_that_cannot_be_cut(tmp_path):
    from kernelsmith.errors import UserError
    from kernelsmith.task_sizes import load_task

    source = (SUITE / "softmax.py").read_text()
    sizes = 'CPU_SIZES = {"ROWS": 8, "COLS": 1500}'
    plain, bad = tmp_path / "plain.py", tmp_path / "bad.py"
    plain.write_text(source.replace(sizes, ""))
    bad.write_text(source.replace(sizes, 'CPU_SIZES = {"NOPE": 1}'))
    assert load_task(plain).source == plain.read_text()
    with pytest.raises(UserError, match=f"^{plain} declares no CPU_SIZES, so --small cannot shrink it$"):
        load_task(plain, small=True)
    with pytest.raises(UserError, match=f"^{bad} cannot shrink it: CPU_SIZES names 'NOPE'"):
        load_task(bad, small=True)


@pytest.mark.parametrize(
    "sizes, bad",
    [
        ('{"BATCH": 16, "MISSING": 3}', "MISSING"),  # no such assignment
        ('{"EPS": 1}', "EPS"),  # a float, not an int
        ('{"SCALE": 1}', "SCALE"),  # an expression, not an int literal
        ('{"get_inputs": 1}', "get_inputs"),  # a function
    ],
)
def test_shrink_rejects_a_key_that_is_not_a_module_level_int(sizes, bad):
    src = SOURCE.replace('{"BATCH": 16, "DIM": 64}', sizes)
    with pytest.raises(ValueError, match=repr(bad)):
        shrink(src)


def test_shrink_file_reads_a_file_saved_with_a_byte_order_mark(tmp_path):
    source = (SUITE / "softmax.py").read_text()
    p = tmp_path / "softmax.py"
    p.write_bytes(b"\xef\xbb\xbf" + source.encode("utf-8"))
    assert shrink_file(p) == shrink(source)


def test_shrink_rejects_a_cpu_sizes_that_is_not_a_literal_dict_of_ints():
    with pytest.raises(ValueError, match="CPU_SIZES"):
        shrink(SOURCE.replace('{"BATCH": 16, "DIM": 64}', '{"BATCH": OTHER}'))
    with pytest.raises(ValueError, match="CPU_SIZES"):
        shrink(SOURCE.replace('{"BATCH": 16, "DIM": 64}', '{"BATCH": 1.5}'))


# --- the suite's files ----------------------------------------------------------------------------


def _module_int_constants(source: str) -> dict[str, int]:
    """Module-level `NAME = <int literal>` assignments."""
    out = {}
    for node in ast.parse(source).body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Constant):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if type(node.value.value) is int and len(targets) == 1 and isinstance(targets[0], ast.Name):
                out[targets[0].id] = node.value.value
    return out


def _load(source: str, name: str, tmp_path):
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(name, None)
    return module


def _meta_tensors(values) -> list[torch.Tensor]:
    out = []
    for v in values if isinstance(values, (list, tuple)) else [values]:
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            out += _meta_tensors(v)
    return out


def test_suite_has_the_tasks():
    assert len(TASKS) >= 11, TASKS
    assert {
        "gelu_gate_bias",
        "softmax",
        "layernorm",
        "rmsnorm",
        "row_sum",
        "cross_entropy",
        "matmul_bias_gelu",
        "batched_matmul",
        "causal_attention",
        "rope",
        "residual_rmsnorm",
    } <= set(TASKS)


@pytest.mark.parametrize("name", TASKS)
def test_task_has_a_seed_and_cpu_sizes_for_every_size_constant(name):
    source = (SUITE / f"{name}.py").read_text()
    Task.from_source(source, name=name)
    Candidate.from_file(SEEDS / f"{name}.py")
    sizes = read_cpu_sizes(source)
    assert sizes, f"{name} has no CPU_SIZES"
    assert set(sizes) == set(_module_int_constants(source)), "CPU_SIZES must name every module-level int size"
    assert all(0 < v <= 4096 for v in sizes.values())
    assert source.startswith('"""'), "the file opens with a docstring: the op, its sizes, bytes and FLOPs"


@pytest.mark.parametrize("name", TASKS)
def test_full_size_task_is_realistic_for_the_h200(name, tmp_path):
    """Full-size inputs, built on the meta device (shapes and dtypes, no memory): the largest is at
    least 64 MB and all of them fit well inside the H200's 141 GB. The reference runs on meta too,
    so the full-size shapes are consistent."""
    task = _load((SUITE / f"{name}.py").read_text(), f"suite_full_{name}", tmp_path)
    with torch.device("meta"):
        inputs = _meta_tensors(task.get_inputs())
        model = task.Model(*task.get_init_inputs())
        with torch.no_grad():
            outputs = _meta_tensors(model(*inputs))
    sizes = [t.numel() * t.element_size() for t in inputs]
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    total = sum(sizes) + params + sum(t.numel() * t.element_size() for t in outputs)
    assert max(sizes) >= 64 * MB, f"{name}: largest input {max(sizes) / MB:.1f} MiB"
    assert total <= 20 * GB, f"{name}: {total / GB:.1f} GiB of inputs, weights and outputs"


# --- the seeds, through the evaluator ---------------------------------------------------------------


@pytest.mark.parametrize("name", TASKS)
def test_seed_is_correct_on_the_cpu(cpu_pool, name):
    task = Task.from_source(shrink_file(SUITE / f"{name}.py"), name=name)
    r = cpu_pool.submit(task, Candidate.from_file(SEEDS / f"{name}.py")).result(timeout=RESULT_WAIT)
    assert r.status == Status.correct, f"status={r.status.value} error={r.error!r}"
    assert r.flags == [], r.flag_details
    assert r.kernel_launches is not None and r.kernel_launches >= len(r.trials) >= 1
