"""A sandbox starts in two steps: imports (host work), then, on the judge's word, its warm-up (on a
GPU: the CUDA context, the profiler's first window, the spin clock), so that a spare's GPU warm-up
never runs beside a timed call (kernelsmith/evaluate/sandboxing/sandbox_handle.py)."""

from __future__ import annotations

import time
import types

from kernelsmith.evaluate.judging.judge import Judge
from kernelsmith.evaluate.sandboxing.sandbox_handle import SandboxHandle


def test_a_held_spare_imports_but_warms_up_only_on_the_word(tmp_path):
    sb = SandboxHandle("cpu", tmp_path, hold_warm_up=True)
    try:
        assert sb.wait(time.monotonic() + 120, 2**62, "start-up")["op"] == "imported"
        assert not sb.chan.poll(1.0)  # no warm-up, no "ready", without the word
        assert not sb.warming and not sb.ready
        sb.warm()
        assert sb.warming
        sb.wait_ready(time.monotonic() + 120)
        assert sb.ready and not sb.warming and sb.info["op"] == "ready"
    finally:
        sb.close()


def test_an_unheld_sandbox_is_ready_as_before(tmp_path):
    sb = SandboxHandle("cpu", tmp_path)
    try:
        assert sb.word_given
        sb.wait_ready(time.monotonic() + 120)
        assert sb.ready and "containment" in sb.info
    finally:
        sb.close()


class FakeSpare:
    def __init__(self, warming: bool):
        self.warming, self.waited = warming, False

    def wait_ready(self, deadline):
        self.waited = True


def test_settle_waits_for_warming_spares_only_where_the_host_can_overlap():
    spares = [FakeSpare(warming=True), FakeSpare(warming=False)]
    judge = types.SimpleNamespace(spares=spares, overlap=True, SANDBOX_START_LIMIT=1.0, settle_ahead=lambda: None)
    Judge.settle(judge)  # type: ignore[arg-type]
    assert [s.waited for s in spares] == [True, False]  # the importing one runs on beside the timed calls
    spares = [FakeSpare(warming=True), FakeSpare(warming=False)]
    Judge.settle(
        types.SimpleNamespace(spares=spares, overlap=False, SANDBOX_START_LIMIT=1.0, settle_ahead=lambda: None)
    )  # type: ignore[arg-type]
    assert [s.waited for s in spares] == [True, True]  # a small host (or KERNELSMITH_SETTLE=all): all
