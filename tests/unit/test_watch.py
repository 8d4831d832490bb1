"""kernelsmith.evaluate.runner.watch: the launch counter and new-thread detection.

LaunchCounter patches Triton's launchers and torch's extension loaders process-wide; each test
first puts fakes in their place with monkeypatch, so the patches are undone after it and no
kernel is ever launched or built.
"""

from __future__ import annotations

import threading
import types

import pytest
import torch.utils.cpp_extension as cpp
from triton.runtime.interpreter import InterpretedFunction
from triton.runtime.jit import JITFunction

from kernelsmith.evaluate.runner import watch


@pytest.fixture
def fakes(monkeypatch):
    """Fake launchers and loaders, recording their calls; restored after the test."""
    calls = []

    def jit_run(self, *args, grid, warmup, **kwargs):
        calls.append(("jit", args, grid))
        return "jit-result"

    def interp_run(self, *args, grid, warmup, **kwargs):
        calls.append(("interp", args, grid))
        return "interp-result"

    class ExtClass:
        pass

    module = types.SimpleNamespace(forward=lambda x: x * 2, Cls=ExtClass, version=3)

    def load_inline(*args, **kwargs):
        calls.append(("load_inline", args, kwargs))
        return module

    def load(*args, **kwargs):
        calls.append(("load", args, kwargs))
        return module

    monkeypatch.setattr(JITFunction, "run", jit_run)
    monkeypatch.setattr(InterpretedFunction, "run", interp_run)
    monkeypatch.setattr(cpp, "load_inline", load_inline)
    monkeypatch.setattr(cpp, "load", load)
    return types.SimpleNamespace(calls=calls, module=module, ExtClass=ExtClass)


def bare_jit() -> JITFunction:
    return JITFunction.__new__(JITFunction)  # no kernel: only `run` is called, and it is faked


# --- counted ----------------------------------------------------------------------------------


def test_a_fresh_counter_counts_nothing(fakes):
    assert watch.LaunchCounter().count == 0


def test_counted_counts_each_completed_call_and_returns_its_result(fakes):
    counter = watch.LaunchCounter()
    launch = counter.counted(lambda *a, **k: ("done", a, k))
    assert launch(1, grid=(4,)) == ("done", (1,), {"grid": (4,)})
    launch(grid=(1, 1))
    assert counter.count == 2


def test_a_call_that_raises_is_not_counted(fakes):
    counter = watch.LaunchCounter()

    def fail(*a, **k):
        raise RuntimeError("launch failed")

    with pytest.raises(RuntimeError, match="launch failed"):
        counter.counted(fail)(grid=(8,))
    assert counter.count == 0


@pytest.mark.parametrize("grid", [(0,), (4, 0), [2, 0, 1], (-1,), (0, 0, 0)])
def test_a_literal_grid_with_an_empty_dimension_is_not_counted(fakes, grid):
    counter = watch.LaunchCounter()
    counter.counted(lambda **k: None)(grid=grid)
    assert counter.count == 0


@pytest.mark.parametrize("grid", [(1,), [3, 2], (1, 1, 1), lambda meta: (0,), None])
def test_other_grids_are_counted(fakes, grid):
    """A callable grid is evaluated by Triton and counts as launched, even one giving zero."""
    counter = watch.LaunchCounter()
    counter.counted(lambda **k: None)(grid=grid)
    assert counter.count == 1


def test_a_call_without_a_grid_counts(fakes):
    counter = watch.LaunchCounter()
    counter.counted(lambda *a: None)(1, 2)
    assert counter.count == 1


# --- Triton's launchers ----------------------------------------------------------------------


def test_triton_jit_launches_are_counted(fakes):
    counter = watch.LaunchCounter()
    fn = bare_jit()
    assert fn.run(1, 2, grid=(2,), warmup=False) == "jit-result"
    fn.run(grid=(3, 1), warmup=False)
    assert counter.count == 2
    assert [c[0] for c in fakes.calls] == ["jit", "jit"]
    assert fakes.calls[0][1] == (1, 2)  # arguments reach the real launcher unchanged


def test_triton_interpreter_launches_are_counted(fakes):
    counter = watch.LaunchCounter()
    fn = InterpretedFunction.__new__(InterpretedFunction)
    assert fn.run(grid=(1,), warmup=False) == "interp-result"
    assert counter.count == 1


def test_triton_launch_over_an_empty_grid_runs_but_is_not_counted(fakes):
    counter = watch.LaunchCounter()
    bare_jit().run(grid=(0, 4), warmup=False)
    assert counter.count == 0
    assert len(fakes.calls) == 1


# --- load_inline / load extensions -----------------------------------------------------------


@pytest.mark.parametrize("loader", ["load_inline", "load"])
def test_calls_into_an_extension_are_counted(fakes, loader):
    counter = watch.LaunchCounter()
    ext = getattr(cpp, loader)(name="ext", sources=[])
    assert fakes.calls[-1][0] == loader  # the original loader still builds it
    assert ext.forward(21) == 42
    ext.forward(1)
    assert counter.count == 2


def test_extension_classes_and_values_pass_through_uncounted(fakes):
    counter = watch.LaunchCounter()
    ext = cpp.load_inline(name="ext")
    assert ext.Cls is fakes.ExtClass
    assert ext.version == 3
    assert counter.count == 0


def test_an_extension_that_is_not_a_python_module_is_returned_as_is(fakes):
    counter = watch.LaunchCounter()
    ext = cpp.load_inline(name="ext", is_python_module=False)
    assert ext is fakes.module
    ext.forward(1)
    assert counter.count == 0


def test_a_missing_extension_attribute_still_raises(fakes):
    watch.LaunchCounter()
    ext = cpp.load(name="ext")
    with pytest.raises(AttributeError):
        ext.no_such_function  # noqa: B018


# --- new_threads -----------------------------------------------------------------------------


def test_no_new_threads():
    assert watch.new_threads(set(threading.enumerate())) == []


def test_a_running_new_thread_is_reported_by_name():
    before = set(threading.enumerate())
    stop = threading.Event()
    threads = [threading.Thread(target=stop.wait, name=n, daemon=True) for n in ("zeta", "alpha")]
    for t in threads:
        t.start()
    try:
        assert watch.new_threads(before) == ["alpha", "zeta"]  # sorted
    finally:
        stop.set()
        for t in threads:
            t.join()


def test_a_finished_thread_is_not_reported():
    before = set(threading.enumerate())
    t = threading.Thread(target=lambda: None, name="short-lived")
    t.start()
    t.join()
    assert watch.new_threads(before) == []


def test_threads_running_before_are_not_reported():
    stop = threading.Event()
    old = threading.Thread(target=stop.wait, name="old-thread", daemon=True)
    old.start()
    try:
        before = set(threading.enumerate())
        assert "old-thread" not in watch.new_threads(before)
        assert "old-thread" in watch.new_threads(set())
    finally:
        stop.set()
        old.join()
