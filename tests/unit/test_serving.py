"""Which kernels serve a mode (kernelsmith/apply/serving.py), on checks whose times are given: what a check's
times say (judge), the re-checks after leaving the kernels that cost the mode out (at most REDOS), and the
mode run as the model was where no kernel makes it faster; optimize's record of it."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

import kernelsmith.apply.serving as serving
from kernelsmith.apply.e2e import E2E
from kernelsmith.apply.forward_time import Spread, Timing
from kernelsmith.apply.gains import Part
from kernelsmith.apply.options import ApplyOptions
from kernelsmith.apply.patch_dir import Chosen
from kernelsmith.apply.run import Applied
from kernelsmith.apply.serving import REDOS, judge, serve
from kernelsmith.optimize.outcome import _note
from kernelsmith.optimize.patching import outcome

SHARE = 0.1  # of the forward, each kernel's regions; the forward takes 1 ms before


def _e2e(mode: str, after: dict[str, float], measure: str = "device time", spread: float = 0.0) -> E2E:
    """A check in which each kernel of `after` took its regions in `after[name]` ms (the model's ops: SHARE ms)."""
    total = 1.0 - SHARE * len(after) + sum(after.values())
    e = E2E(outputs_match=True, mismatch=None, max_abs_err=0.0, trials=3, mode=mode)
    e.timings = [
        Timing(measure, Spread(1.0, 1.0 - spread, 1.0 + spread), Spread(total, total - spread, total + spread))
    ]
    e.kernel_ms = {n: Spread(ms, ms, ms) for n, ms in after.items()}
    e.fired = {n: 1.0 for n in after}
    return e


PARTS = {n: Part(SHARE, 1, 2.0) for n in "abcd"}


def test_what_a_checks_times_say():
    faster = judge(_e2e("eager", {"a": 0.05}), PARTS, "device time", "none")
    assert faster.speedup == pytest.approx(1 / 0.95) and not faster.culprits and faster.slower is None
    slow = judge(_e2e("eager", {"a": 0.3, "b": 0.05}), PARTS, "device time", "none")
    assert list(slow.culprits) == ["a"] and slow.slower == "made it slower (0.87x device time)"
    assert slow.culprits["a"].startswith("its regions took 0.1 -> 0.3 ms per forward in device time")
    # compiled: capture's shares do not split a compiled forward, so no kernel is named; the mode is slower
    compiled = judge(_e2e("compile", {"a": 0.3}), PARTS, "device time", "none")
    assert not compiled.culprits and compiled.slower == "made it slower (0.833x device time)"
    # within the spread, not faster: no kernel makes the mode faster
    even = judge(_e2e("graphs", {"a": 0.11}, spread=0.05), PARTS, "device time", "none")
    assert even.slower == "did not make it faster (0.99x device time, within the spread)"
    # CPU times are relative only, and --accept-slower all keeps what was measured: nothing is left out
    for judged in (
        judge(_e2e("eager", {"a": 0.3}, measure="CPU time"), PARTS, "CPU time", "none"),
        judge(_e2e("eager", {"a": 0.3}), PARTS, "device time", "all"),
    ):
        assert not judged.culprits and judged.slower is None


def _serving(monkeypatch, times) -> tuple[list[Chosen], list[list[str]]]:
    """serve() on checks faked from `times(running) -> {kernel: ms}`: the kernels, and each check's kernels."""
    kernels = [Chosen("r", n, SHARE, 1, 2.0, 1) for n in "abcd"]
    ran: list[list[str]] = []
    monkeypatch.setattr(serving, "write_modes", lambda *a, **k: None)

    def check(ck, mode):
        running = [c.name for c in kernels if mode in c.modes]
        seen = serving._Seen(
            running, {c.name: c.left_out.get(mode, "") for c in kernels if c.name not in running}, {}, {}
        )
        ran.append(running)
        if not running:
            return None, seen
        e = _e2e(mode, times(running))
        e.unserved = seen.unserved
        e.skipped = dict(e.unserved)
        return e, seen

    monkeypatch.setattr(serving, "_check", check)
    return kernels, ran


def test_kernels_that_cost_the_mode_are_left_out_and_the_rest_checked_again(monkeypatch):
    """a costs eager mode time; c too, once a is gone: two re-checks, and b alone serves."""
    times = lambda running: {
        n: {"a": 0.3, "b": 0.05, "c": 0.05 if "a" in running else 0.2, "d": 0.1}[n] for n in running
    }
    kernels, ran = _serving(monkeypatch, lambda r: {n: ms for n, ms in times(r).items() if n != "d"})
    kernels[3].why = "no successful program in the run"
    ck = SimpleNamespace(
        opts=ApplyOptions(modes=("eager",)), parts=PARTS, measure="device time", out=Path("."), device="cuda"
    )
    checks, modes = serve(ck, kernels)  # pyright: ignore[reportArgumentType]
    assert ran == [["a", "b", "c"], ["b", "c"], ["b"]] and len(ran) == 1 + REDOS
    eager = modes[0]
    assert (
        eager.kernels == ["b"]
        and eager.as_was is None
        and [list(t.left_out) for t in eager.tried] == [["a"], ["c"], []]
    )
    assert eager.said == "eager: 1 kernel, 1.05x (device time)" and checks[0].fired == {"b": 1.0}
    assert [c.modes for c in kernels[:3]] == [[], ["eager"], []]
    assert kernels[2].left_out["eager"].startswith("its regions took 0.1 -> 0.2 ms")
    assert [m.said for m in modes[1:]] == [
        "compile: as the model was, not checked (--mode compile measures it)",
        "graphs: as the model was, not checked (--mode graphs measures it)",
    ]


def test_a_mode_still_slower_when_no_re_check_is_left_runs_as_the_model_was(monkeypatch):
    """Each check names one more kernel that costs the mode time: after REDOS re-checks the mode is still
    slower, so no kernel serves it (the check that decided it is none); compile mode, where no kernel is
    named, runs as it was at once."""
    order = ["a", "b", "c", "d"]
    kernels, ran = _serving(monkeypatch, lambda r: {n: 0.3 if n == r[0] else 0.05 for n in r})
    ck = SimpleNamespace(
        opts=ApplyOptions(modes=("eager", "compile")), parts=PARTS, measure="device time", out=Path("."), device="cuda"
    )
    checks, modes = serve(ck, kernels)  # pyright: ignore[reportArgumentType]
    assert ran[:3] == [order, order[1:], order[2:]] and not checks
    eager, compiled = modes[0], modes[1]
    assert eager.kernels == [] and eager.as_was == "c made it slower (0.87x device time)"
    assert kernels[3].left_out["eager"] == "c made it slower (0.87x device time)" and kernels[3].modes == []
    assert ran[3] == order and compiled.as_was == "a, b, c, d made it slower (0.952x device time)"
    assert len(compiled.tried) == 1 and all(c.modes == [] for c in kernels)


def test_optimize_records_each_mode_and_a_kernel_that_serves_none():
    kernels = [Chosen("r", "a", SHARE, 1, 2.0, 1), Chosen("r", "b", SHARE, 1, 2.0, 1)]
    kernels[0].left_out = {"eager": "its regions took 0.1 -> 0.3 ms", "compile": "not checked"}
    kernels[1].modes = ["eager"]
    e = _e2e("eager", {"b": 0.05})
    e.unserved = e.skipped = {"a": kernels[0].left_out["eager"]}
    said = "eager: 1 kernel, 1.05x (device time)"
    modes = [serving.ModeServed("eager", True, ["b"], said=said), serving.ModeServed("compile", False, as_was="x")]
    applied = Applied(out_dir="p", entry="m:make", device="cuda", kernels=kernels, e2e=e, checks=[e], modes=modes)
    done = outcome(applied, "key", {})
    assert [m.said for m in done.modes] == [said, ""] and done.modes[1].as_was == "x"
    a, b = done.kernels["a"], done.kernels["b"]
    assert (a.modes, a.left_out, a.taken, a.why) == ([], {"eager": "its regions took 0.1 -> 0.3 ms"}, {}, None)
    assert b.modes == ["eager"] and b.taken == {"eager": 1.0} and b.after_ms is not None
    region = SimpleNamespace(why=None)
    info = SimpleNamespace(exists=True, best=object(), iterations=3, start=None)
    note = _note(region, SimpleNamespace(failed=None), info, SimpleNamespace(start="seed", kernel=a), "cuda")  # pyright: ignore[reportArgumentType]
    assert note == "serves no mode: eager: its regions took 0.1 -> 0.3 ms"
