"""Seeds made from recorded Inductor output, judged by the evaluator on the CPU (Triton interpreter),
and `kernelsmith seed`'s one-line errors. The transformation itself: tests/unit/test_seed_transform.py."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import CASES, REPO

from kernelsmith.evaluate import Status
from kernelsmith.evolve.store import STORE_NAME
from kernelsmith.seed.assemble import candidate_source
from kernelsmith.seed.record import InductorRecord
from kernelsmith.task import Task

SEED_CASES = CASES / "seed"
RESULT_WAIT = 600.0


def ks(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kernelsmith", *map(str, args)], capture_output=True, text=True, cwd=REPO, timeout=300
    )


def one_line_error(p: subprocess.CompletedProcess, needle: str) -> None:
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stdout + p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], p.stderr


# Every fixture with a Triton kernel: the GEMM and the convolutions keep their library call
# (torch.mm, torch.convolution) beside Inductor's fused epilogue (conv_min_add_mul's with the constant
# of torch.tensor(c) folded in); three are reductions.
@pytest.mark.parametrize(
    "name",
    [
        "gemm_mul_leakyrelu",
        "conv_relu_bias",
        "softmax",
        "layernorm",
        "rowsum_long",
        "conv_min_add_mul",
        "gemm_batchnorm_train",
        "gemm_templates",
        "conv_templates",
    ],
)
def test_a_seed_from_recorded_inductor_output_is_a_success(cpu_pool, name):
    task = Task.from_file(SEED_CASES / name / "task.py", name=name)
    source = candidate_source(InductorRecord.load(SEED_CASES / name), task)
    result = cpu_pool.submit(task, source).result(timeout=RESULT_WAIT)
    assert result.status is Status.correct and result.success, (result.status, result.flags, result.error)
    assert result.flags == []


# The seed's ModelNew beside the task's Model under Triton's interpreter, as the evaluator builds them:
# the same outputs call after call, and the same buffers after (BatchNorm's running statistics).
SIDE_BY_SIDE = """
import importlib.util, sys, torch
def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
task, seed = load(sys.argv[1], "task"), load(sys.argv[2], "seed")
torch.manual_seed(0); reference = task.Model(*task.get_init_inputs())
torch.manual_seed(0); new = seed.ModelNew(*task.get_init_inputs())
with torch.no_grad():
    for _ in range(2):
        x = task.get_inputs()
        torch.testing.assert_close(new(*x), reference(*x))
for (name, ref), (_, got) in zip(reference.named_buffers(), new.named_buffers()):
    torch.testing.assert_close(got, ref, msg=name)
    print("updated", name, int((ref != 0).sum()))
try:
    new.eval()(*x)
except RuntimeError as exc:
    print("eval:", exc)
"""


def test_a_batchnorm_seed_updates_the_running_statistics_as_the_model_does(tmp_path):
    name = "gemm_batchnorm_train"  # KernelBench L2/97's structure, the Model in training mode as built
    task = Task.from_file(SEED_CASES / name / "task.py", name=name)
    (tmp_path / "seed.py").write_text(candidate_source(InductorRecord.load(SEED_CASES / name), task))
    (tmp_path / "side_by_side.py").write_text(SIDE_BY_SIDE)
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)}
    p = subprocess.run(
        [sys.executable, tmp_path / "side_by_side.py", SEED_CASES / name / "task.py", tmp_path / "seed.py"],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "updated bn.running_mean 32" in p.stdout and "updated bn.num_batches_tracked 1" in p.stdout
    assert "eval: this seed is Inductor's code for the Model in training mode: call .train() first" in p.stdout


def test_seed_without_a_gpu_says_so_in_one_line():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is visible: seed would run")
    one_line_error(ks("seed", SEED_CASES / "softmax" / "task.py"), "needs a CUDA GPU")


def test_seed_of_a_file_that_is_not_a_task_says_so_in_one_line(tmp_path):
    one_line_error(ks("seed", CASES / "not_a_task.py"), "is not a task")
    one_line_error(ks("seed", tmp_path / "missing.py"), "not found")
    one_line_error(ks("seed", SEED_CASES / "softmax" / "task.py", "--out", tmp_path), "is a directory")


def test_seed_says_in_one_line_that_the_out_directory_is_missing_before_compiling(tmp_path):
    # The seed was written after Inductor's minutes of compiling: to a missing directory, a traceback.
    missing = tmp_path / "missing" / "seed.py"
    one_line_error(ks("seed", SEED_CASES / "softmax" / "task.py", "--out", missing), "does not exist")


# The start of a search without a seed (evolve, evolve-suite on CUDA): the seed step runs as its own
# process; here a stand-in for `kernelsmith seed` (a script with its command line) writes a known
# candidate or fails as the real one does without a GPU, and the CPU pool judges what it wrote.
FAKE_SEED = """
import sys
from pathlib import Path
task, out = sys.argv[1], sys.argv[sys.argv.index("--out") + 1]
if "fail" in sys.argv[0]:
    print("error: seed needs a CUDA GPU (Inductor compiles the task for it), and none is visible here", file=sys.stderr)
    sys.exit(2)
Path(out).write_text(Path(sys.argv[0]).with_name("candidate.py").read_text())
"""


def _fake_seed(tmp_path, name: str, candidate: str) -> list[str]:
    script = tmp_path / name
    script.write_text(FAKE_SEED)
    (tmp_path / "candidate.py").write_text(candidate)
    return [sys.executable, str(script)]


def test_a_search_without_a_seed_starts_from_the_seed_step_or_says_why_not(cpu_pool, tmp_path):
    from kernelsmith.seed.start import inductor_start

    task_path = SEED_CASES / "gemm_mul_leakyrelu" / "task.py"
    task = Task.from_file(task_path, name="gemm_mul_leakyrelu")
    source = candidate_source(InductorRecord.load(SEED_CASES / "gemm_mul_leakyrelu"), task)
    said: list[str] = []
    ok = _fake_seed(tmp_path, "seed_ok.py", source)
    # the tuner starts from a seed whatever its speed (it tunes it; the engine judges the start)
    run_dir = tmp_path / "run"
    assert inductor_start(task, task_path, run_dir, "tune", cpu_pool, said.append, command=ok) == source
    assert said[-1] == "starting from a seed from torch.compile's code (kernelsmith seed)"
    # an LLM search starts from it only when it is a success faster than the reference: on the CPU
    # (the interpreter) it is not, so the LLM writes the first version, and the line says why
    assert inductor_start(task, task_path, run_dir, "llm", cpu_pool, said.append, command=ok) is None
    assert said[-1].startswith("a seed from torch.compile's code (kernelsmith seed) is ") and said[-1].endswith(
        "x the reference: the LLM writes the first version"
    )
    failing = _fake_seed(tmp_path, "seed_fail.py", source)
    assert inductor_start(task, task_path, run_dir, "tune", cpu_pool, said.append, command=failing) is None
    assert said[-1] == (
        "no seed from torch.compile: seed needs a CUDA GPU (Inductor compiles the task for it), and none is "
        "visible here; the tuner needs --seed"
    )
    # a run directory that holds a run keeps its stored start: nothing is derived, nothing said
    run_dir.mkdir()
    (run_dir / STORE_NAME).write_bytes(b"")
    told = len(said)
    assert inductor_start(task, task_path, run_dir, "tune", cpu_pool, said.append, command=ok) is None
    assert len(said) == told


def test_evolve_suite_asks_for_a_start_only_for_tasks_without_a_seed(tmp_path):
    from test_bench import RecordingBackend

    from kernelsmith.evolve.run import evolve_config
    from kernelsmith.suite.evolve_suite import evolve_suite

    suite, seeds = tmp_path / "suite", tmp_path / "seeds"
    suite.mkdir()
    seeds.mkdir()
    for name in ("given", "derived"):
        (suite / f"{name}.py").write_text((CASES / "rowsum_task.py").read_text())
    (seeds / "given.py").write_text((CASES / "rowsum_triton.py").read_text())
    asked: list[str] = []

    def start(task, path, run_dir, say):
        asked.append(task.name)
        return "# derived start\n" + (CASES / "rowsum_triton.py").read_text()

    backend = RecordingBackend()
    cfg = evolve_config(None, {"iterations": 0, "evaluation": {"device": "cpu"}}, "tune")
    evolve_suite(suite, seeds, tmp_path / "runs", cfg, False, backend, lambda text: None, start=start)
    assert asked == ["derived"]
    starts: dict[str, str] = {}  # the first submission of a task is its start (the bench's come after)
    for task, code in backend.submitted:
        starts.setdefault(task.name, getattr(code, "source", code))
    assert starts["derived"].startswith("# derived start") and not starts["given"].startswith("# derived")
