"""One region's failure is that region's alone (issue 54): on an H100 a GPT-2's one evaluation that failed in
the judge ended the whole `optimize` with a traceback. Here, on the CPU, the MLP of test_optimize.py: its GELU
region's evaluations fail as that judge's did, then (resumed) its start fails; each time the GELU region gets
one line, in the state and on the page, with its traceback kept apart, the add + LayerNorm region is searched
and patched, and the command ends normally."""

from __future__ import annotations

import textwrap
from concurrent.futures import Future
from pathlib import Path

from test_optimize import GELU_SEED, MLP, NORM_SEED

from kernelsmith.evaluate.pool import EvalPool
from kernelsmith.optimize import OptimizeOptions
from kernelsmith.optimize import optimize as optimize_here

WORKER_FAILED = (
    "evaluation worker failed:\nTraceback (most recent call last):\n"
    '  File "kernelsmith/evaluate/judging/judge.py", line 311, in check\n'
    "RuntimeError: Expected all tensors to be on the same device, but got other is on cuda:0"
)
NORM = "mlp_add_native_layer_norm"


def test_a_region_whose_evaluation_or_start_fails_leaves_the_others_searched_and_patched(tmp_path: Path, monkeypatch):
    (tmp_path / "mlp.py").write_text(textwrap.dedent(MLP))
    (tmp_path / "seeds").mkdir()
    (tmp_path / "seeds/gelu.py").write_text(GELU_SEED)
    (tmp_path / f"seeds/{NORM}.py").write_text(NORM_SEED)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # optimize sets it for the CPU: not for later tests
    submit = EvalPool.submit

    def failing(self, task, candidate, options=None) -> Future:
        if task.name != "gelu":
            return submit(self, task, candidate, options)
        fut: Future = Future()
        fut.set_exception(RuntimeError(WORKER_FAILED))
        return fut

    monkeypatch.setattr(EvalPool, "submit", failing)
    opts = OptimizeOptions(entry="mlp.py:make", out=Path("work"), device="cpu", seeds="seeds", budget_s=1.0)
    said: list[str] = []
    result = optimize_here(opts, said.append)
    regions = {r.name: r for r in result.regions}
    line = "gelu: its search failed: RuntimeError: evaluation worker failed: ... RuntimeError: Expected all tensors"
    assert any(s.startswith(line) for s in said), said
    assert (regions["gelu"].note or "").startswith(line.removeprefix("gelu: ")), regions["gelu"]
    assert "Traceback" in (tmp_path / "work/failures/gelu.txt").read_text()
    # The other region was searched and patched; the patch passed its check with its one kernel.
    assert regions[NORM].verdict == "correct" and "failed" not in (regions[NORM].note or ""), regions[NORM]
    assert result.patch is not None and result.patch.path is not None and result.passed, result.reason
    assert result.patch.kernels[NORM].in_patch and "gelu" not in result.patch.kernels
    assert "its search failed" in (tmp_path / "work/report.html").read_text()

    # Resumed: the failed region is tried again (it was not the start's fault), and now its start fails.
    import kernelsmith.optimize.run as optimize_run

    find_start = optimize_run.find_start

    def start_fails(task, path, *args):
        if path.stem == "gelu":
            raise RuntimeError("the seed step's worker failed")
        return find_start(task, path, *args)

    monkeypatch.setattr(optimize_run, "find_start", start_fails)
    said.clear()
    result = optimize_here(opts, said.append)
    gelu = {r.name: r for r in result.regions}["gelu"]
    assert (gelu.note or "").startswith("its start failed: RuntimeError: the seed step's worker failed"), gelu
    assert result.passed and "patch: done earlier, of the same kernels and modes" in said, said
