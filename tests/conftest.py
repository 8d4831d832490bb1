"""Shared fixtures: test cases on disk, a private cache directory, one warm CPU evaluation pool."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
CASES = TESTS / "cases"
UNIT = TESTS / "unit"  # fast tests, one file per module: `make unit` (`pytest -m "not e2e"` also imports the rest)
REPO = TESTS.parent

# Set at import, before anything spawns a judge or sandbox (they inherit the environment) and
# before any test reads the cache: no test touches the user's ~/.cache/kernelsmith.
_CACHE_DIR = tempfile.mkdtemp(prefix="ks-test-cache-")
_PREVIOUS_CACHE_DIR = os.environ.get("KERNELSMITH_CACHE_DIR")
os.environ["KERNELSMITH_CACHE_DIR"] = _CACHE_DIR

# The suite's sandboxes get the layers of a host without bubblewrap, as GPU images are: every guarantee
# still holds (pidns, landlock, seccomp: tests/redteam/test_escapes.py's "cpu-without-bwrap"), and the
# sandboxes are forked from the judge's template, the path a GPU user's evaluations take (a spawned one
# costs `import torch, triton` each). Bubblewrap's own path: the escape set's "cpu-all-layers" and
# tests/evaluate/test_containment.py, which set or clear the variable themselves. A caller's choice wins.
os.environ.setdefault("KERNELSMITH_SANDBOX_LAYERS", "pidns,landlock,seccomp")

# Honest candidates get plenty of time; the tests of faults pass their own, shorter options.
POOL_TIMEOUT = 120.0
MEMORY_LIMIT = "1G"
TRIALS = 3


def case_path(name: str) -> Path:
    """Path of tests/cases/<name> (the .py suffix may be left out)."""
    p = CASES / name
    if not p.suffix:
        p = p.with_suffix(".py")
    assert p.is_file(), f"no test case {p}"
    return p


@pytest.fixture(scope="session")
def case():
    """The `case(name) -> Path` helper, as a fixture: case("rowsum_task") is tests/cases/rowsum_task.py."""
    return case_path


def pytest_collection_modifyitems(config, items):
    """Mark every test outside tests/unit `e2e` (sandboxes, subprocesses, HTTP) and those inside it `unit`."""
    for item in items:
        item.add_marker(pytest.mark.unit if Path(item.path).resolve().is_relative_to(UNIT) else pytest.mark.e2e)


def pytest_unconfigure(config):
    """Remove the session's cache directory and restore the variable, whatever tests ran."""
    if _PREVIOUS_CACHE_DIR is None:
        os.environ.pop("KERNELSMITH_CACHE_DIR", None)
    else:
        os.environ["KERNELSMITH_CACHE_DIR"] = _PREVIOUS_CACHE_DIR
    shutil.rmtree(_CACHE_DIR, ignore_errors=True)


@pytest.fixture(scope="session")
def cache_dir() -> Path:
    """The session's private KERNELSMITH_CACHE_DIR (removed when pytest ends)."""
    os.environ["KERNELSMITH_CACHE_DIR"] = _CACHE_DIR
    return Path(_CACHE_DIR)


@pytest.fixture(scope="session")
def cpu_pool(cache_dir):
    """One warm single-worker CPU pool (Triton interpreter) shared by every evaluation test."""
    from kernelsmith.evaluate import EvalOptions, EvalPool

    opts = EvalOptions(device="cpu", timeout=POOL_TIMEOUT, memory_limit=MEMORY_LIMIT, trials=TRIALS)
    pool = EvalPool(device="cpu", workers=1, options=opts)
    yield pool
    pool.close()


def recorded_counters() -> dict:
    """A counters report (CountersReport as a dict) from Nsight Compute output recorded on the H200
    (tests/cases/profiles/ncu_h200_2026-12-03.csv: two launches of one kernel)."""
    from kernelsmith.evaluate.counters import CountersReport, merge_launches, parse_ncu_csv

    launches = parse_ncu_csv((CASES / "profiles" / "ncu_h200_2026-12-03.csv").read_text())
    report = CountersReport(status="ok", kernels=merge_launches(launches, 3), launches=len(launches), seconds=6.7)
    return report.model_dump(mode="json")


def recorded_verdict(task: str) -> dict:
    """The verdict record (kernel breakdown, times, floor) of an honest KernelBench candidate as
    recorded on the H200 (tests/cases/profiles): what prompts and reports are tested with."""
    import json
    from collections import Counter

    from kernelsmith.evaluate.measuring.activity import Activity
    from kernelsmith.evaluate.measuring.breakdown import kernel_breakdown

    case = json.loads((CASES / "profiles" / "h200_gate_2026-12-03.json").read_text())["cases"][task]
    act = Activity(
        kernels=Counter({k["name"]: k["count"] for k in case["kernels"]}),
        kernel_ns=Counter({k["name"]: round(k["device_ms"] * 1e6) for k in case["kernels"]}),
        windows=case["windows"],
    )
    own = {k["name"] for k in case["kernels"] if k["own"]}
    records, kernel_ms = kernel_breakdown(act, lambda k: k in own)
    return {
        "status": "correct",
        "correct": True,
        "candidate_ms": case["candidate_ms"],
        "floor_ms": case["floor_ms"],
        "kernel_ms": kernel_ms,
        "kernels": [r.model_dump() for r in records],
    }


RECORDED_TASKS = ("19_ReLU", "23_Softmax", "36_RMSNorm_", "1_Conv2D_ReLU_BiasAdd")


class OpsRan:
    """The aten ops a block ran, by name ("rsqrt": count), read from the CPU profiler's record: unlike a
    dispatch mode of the test's own, it leaves a patch's traced forwards as they serve (Dynamo compiles no
    frame under a dispatch mode). `ops`: every aten op, those an op runs inside it too; `top`: those no
    other aten op runs (a kernel's `rms_norm`, not the ops it is made of on the CPU)."""

    def __enter__(self) -> OpsRan:
        import torch

        self._prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
        self._prof.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._prof.__exit__(*exc)
        self.ops: dict[str, int] = {}
        self.top: dict[str, int] = {}
        for event in self._prof.events():
            if event.name.startswith("aten::"):
                name = event.name.removeprefix("aten::")
                self.ops[name] = self.ops.get(name, 0) + 1
                parent = event.cpu_parent
                while parent is not None and not parent.name.startswith("aten::"):
                    parent = parent.cpu_parent
                if parent is None:
                    self.top[name] = self.top.get(name, 0) + 1
