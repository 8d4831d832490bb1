"""A graph's calls and input sets that do not fit beside the judge: timed once more call by call, said."""

from __future__ import annotations

import types

import pytest
import torch

from kernelsmith.evaluate.measuring import capture, timing
from kernelsmith.evaluate.options import EvalOptions
from kernelsmith.evaluate.result import TimingStats
from kernelsmith.evaluate.runner import sandbox


def _measurement(graph: bool) -> timing.Measurement:
    method = "cuda_graph" if graph else "cuda_events_sync"
    stats = TimingStats.from_samples([1.0, 1.0, 1.0], method=method)
    return timing.Measurement(stats, stats, ("tensor", []), 7)


class Seen(list):
    oom = False  # the first graph measurement runs out of device memory


@pytest.fixture
def calls(monkeypatch):
    seen = Seen()
    monkeypatch.setattr(capture, "release_memory", lambda: seen.append("released"))

    def measure(work, opts, seed, graph=True, keep=None):
        seen.append(("measure", graph))
        if graph and seen.count(("measure", True)) == 1 and seen.oom:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 7.00 GiB. GPU 0 has ...")
        return _measurement(graph)

    monkeypatch.setattr(timing, "measure", measure)
    return seen


def _sandbox(device: str):
    return types.SimpleNamespace(device=device, snapshot=lambda out: out)


def test_out_of_memory_in_the_graph_is_timed_call_by_call_and_said(calls):
    calls.oom = True
    m = sandbox.Sandbox._measure(_sandbox("cuda"), None, EvalOptions(device="cuda"), 3, True)
    assert calls == [("measure", True), "released", ("measure", False)]
    assert m.device.method == "cuda_events_sync"
    assert m.fallback == ("out of device memory timing in a CUDA graph (CUDA out of memory): timed call by call")


def test_a_graph_that_fits_is_timed_once(calls):
    calls.oom = False
    m = sandbox.Sandbox._measure(_sandbox("cuda"), None, EvalOptions(device="cuda"), 3, True)
    assert calls == [("measure", True)] and m.fallback is None and m.device.method == "cuda_graph"


def test_out_of_memory_call_by_call_is_the_candidates(calls, monkeypatch):
    def measure(work, opts, seed, graph=True, keep=None):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 7.00 GiB.")

    monkeypatch.setattr(timing, "measure", measure)
    with pytest.raises(torch.OutOfMemoryError):
        sandbox.Sandbox._measure(_sandbox("cuda"), None, EvalOptions(device="cuda"), 3, False)
