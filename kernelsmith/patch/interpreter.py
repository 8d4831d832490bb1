"""Triton kernels of a patch on the CPU: Triton's interpreter, switched on where it can be. Torch only:
`kernelsmith apply` copies this file into the patch it writes."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import torch

_USES_TRITON = re.compile(r"^\s*(import|from)\s+triton\b", re.MULTILINE)


def interpret_triton(root: Path, spec: dict) -> str | None:
    """On the CPU, Triton kernels run only in Triton's interpreter (TRITON_INTERPRET=1, read when a function
    is jitted). The patch sets it, as `kernelsmith apply` does, when triton is not imported yet. Where triton
    was imported first (loading a Hugging Face model imports it), the functions it jitted then, triton.language's
    own (tl.sum, tl.max, tl.softmax, ...), are not interpreted, and a kernel calling them would raise
    "Cannot call @triton.jit'd outside of the scope of a kernel": where torch sees no GPU (no Triton kernel in
    the process can run any other way) the patch lets them run in the interpreter, as they would had the
    switch been set first. Where a GPU is there, something else may use Triton on it: the patch refuses in one
    line before any forward, saying to set the switch before Python starts (returned: the refusal)."""
    uses = any(_USES_TRITON.search((root / e["kernel"]).read_text(encoding="utf-8")) for e in spec["kernels"])
    truthy = lambda: os.environ.get("TRITON_INTERPRET", "").lower() in ("1", "true", "yes", "on")
    if not uses or "triton" not in sys.modules:
        if uses and not truthy():
            os.environ["TRITON_INTERPRET"] = "1"
        return None
    says = (
        "the patch's Triton kernels run on the CPU only in Triton's interpreter: set TRITON_INTERPRET=1 before "
        "Python starts (triton was imported without it, and {})"
    )
    try:
        from triton.language import core as tl_core
        from triton.runtime.interpreter import InterpretedFunction
        from triton.runtime.jit import JITFunction
    except ImportError:  # another Triton than the one this was written for
        return says.format("this Triton's own functions cannot be switched over")
    if truthy() and not isinstance(getattr(tl_core.tensor, "sum", None), JITFunction):
        return None  # triton.language was jitted with the interpreter on
    if torch.cuda.is_available():
        return says.format("a GPU is there, so the patch does not switch Triton over")
    os.environ["TRITON_INTERPRET"] = "1"
    if getattr(JITFunction.__call__, "interpreted", False):
        return None
    raising = JITFunction.__call__  # what it does outside a kernel when not interpreted: raise

    def interpreted(self, *args, **kwargs):  # as an InterpretedFunction made by @triton.jit would run
        if not truthy():
            return raising(self, *args, **kwargs)
        if "_interpreted" not in self.__dict__:
            self.__dict__["_interpreted"] = InterpretedFunction(self.fn)
        return self.__dict__["_interpreted"](*args, **kwargs)

    interpreted.interpreted = True  # pyright: ignore[reportFunctionMemberAccess]
    JITFunction.__call__ = interpreted
    for name, member in list(vars(tl_core.tensor).items()):  # x.sum(): a method, as the interpreter makes it
        if isinstance(member, JITFunction):
            setattr(tl_core.tensor, name, lambda *args, _f=member, **kwargs: _f(*args, **kwargs))

    return None
