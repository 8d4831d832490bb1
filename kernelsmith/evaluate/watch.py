"""What the sandbox watches while candidate code runs: kernel launches, torch ops, threads.

These are runtime checks, not regexes: a kernel that is defined but never launched, a launch
that fails into a `try/except` fallback, or torch doing the real work beside a token kernel all
show up here. Installed before the candidate is imported.
"""

from __future__ import annotations

import threading

from torch.utils._python_dispatch import TorchDispatchMode

# aten ops that allocate, view, copy or describe tensors: the glue every launcher needs.
# Anything else that runs in forward outside a custom kernel is torch doing compute.
GLUE_OPS = frozenset("""
    empty empty_like empty_strided new_empty new_empty_strided zeros zeros_like new_zeros ones ones_like
    new_ones full full_like new_full fill_ zero_ fill resize_ set_ view view_as reshape _reshape_alias
    _unsafe_view expand expand_as permute transpose transpose_ t t_ as_strided slice select unsqueeze
    squeeze unsqueeze_ squeeze_ flatten unflatten split split_with_sizes chunk narrow unbind detach
    alias lift_fresh lift_fresh_copy clone copy_ _to_copy contiguous to _local_scalar_dense
    is_contiguous sym_size sym_stride sym_numel sym_storage_offset stride size numel dim
    _has_compatible_shallow_copy_type view_as_real view_as_complex _conj _neg_view resolve_conj resolve_neg
""".split())


def _empty_grid(grid) -> bool:
    """A launch over a literal grid with a zero dimension does no work and does not count.
    (A callable grid is evaluated by Triton itself and is counted as launched.)"""
    return isinstance(grid, (tuple, list)) and any(isinstance(g, int) and g <= 0 for g in grid)


class LaunchCounter:
    """Counts custom-kernel launches that completed: Triton (compiled or interpreted) and calls
    into extensions built by `torch.utils.cpp_extension.load_inline` / `load`."""

    def __init__(self):
        self.count = 0
        self.depth = 0  # > 0 while inside a launch: torch ops there belong to the launcher
        self._patch_triton()
        self._patch_cpp_extension()

    def counted(self, fn):
        counter = self

        def launch(*args, **kwargs):
            counter.depth += 1
            try:
                result = fn(*args, **kwargs)
            finally:
                counter.depth -= 1
            if not _empty_grid(kwargs.get("grid")):
                counter.count += 1
            return result

        return launch

    def _patch_triton(self) -> None:
        from triton.runtime.jit import JITFunction

        classes = [JITFunction]
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


class TorchOpRecorder(TorchDispatchMode):
    """Records compute ops torch runs in forward outside custom-kernel launches."""

    def __init__(self, launches: LaunchCounter):
        super().__init__()
        self.launches = launches
        self.compute_ops: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self.launches.depth == 0:
            name = func.overloadpacket.__name__
            if name not in GLUE_OPS:
                self.compute_ops.add(name)
        return func(*args, **(kwargs or {}))


def new_threads(before: set[threading.Thread]) -> list[str]:
    """Names of threads started since `before` that are still running."""
    return sorted(t.name for t in threading.enumerate() if t not in before and t.is_alive())
