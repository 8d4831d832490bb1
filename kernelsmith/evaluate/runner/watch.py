"""What the sandbox watches in Python while candidate code runs: kernel launches and threads.

Launches are counted where they are made (Triton's launcher, calls into `load_inline`
extensions): the CPU rule counts own kernels with it, and on CUDA it is the fallback when device
activity cannot be recorded. What ran on the device is recorded by kernelsmith.evaluate.measuring.activity.
Installed before the candidate is imported.
"""

from __future__ import annotations

import threading
from typing import Any


def _empty_grid(grid) -> bool:
    """A launch over a literal grid with a zero dimension does no work and does not count.
    (A callable grid is evaluated by Triton itself and is counted as launched.)"""
    return isinstance(grid, (tuple, list)) and any(isinstance(g, int) and g <= 0 for g in grid)


class LaunchCounter:
    """Counts custom-kernel launches that completed: Triton (compiled or interpreted) and calls
    into extensions built by `torch.utils.cpp_extension.load_inline` / `load`."""

    def __init__(self):
        self.count = 0
        self._patch_triton()
        self._patch_cpp_extension()

    def counted(self, fn):
        counter = self

        def launch(*args, **kwargs):
            result = fn(*args, **kwargs)
            if not _empty_grid(kwargs.get("grid")):
                counter.count += 1
            return result

        return launch

    def _patch_triton(self) -> None:
        from triton.runtime.jit import JITFunction

        classes: list[type[Any]] = [JITFunction]
        try:
            from triton.runtime.interpreter import InterpretedFunction

            classes.append(InterpretedFunction)
        except ImportError:
            pass
        for cls in classes:
            cls.run = self.counted(cls.run)

    def _patch_cpp_extension(self) -> None:
        import torch.utils.cpp_extension as cpp

        counter = self

        class CountingModule:
            def __init__(self, module):
                self._module = module

            def __getattr__(self, name):
                value = getattr(self._module, name)
                return counter.counted(value) if callable(value) and not isinstance(value, type) else value

        for name in ("load_inline", "load"):
            original = getattr(cpp, name)

            def build(*args, __original=original, **kwargs):
                module = __original(*args, **kwargs)
                return CountingModule(module) if kwargs.get("is_python_module", True) is not False else module

            setattr(cpp, name, build)


def new_threads(before: set[threading.Thread]) -> list[str]:
    """Names of threads started since `before` that are still running."""
    return sorted(t.name for t in threading.enumerate() if t not in before and t.is_alive())
