"""A candidate program: its source and the static facts read from it without running it."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

from kernelsmith.errors import CandidateError
from kernelsmith.identity import program_hash
from kernelsmith.task import read_source, top_level_names

TRITON_DECORATORS = {"jit", "autotune", "heuristics"}
# `__global__ void name(` or `__global__ void __launch_bounds__(256) name<T>(`, in CUDA source strings.
_GLOBAL_FN = re.compile(r"__global__\s+(?:[\w:<>,\s*&]+?\s+)?(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*[(<]")


@dataclass(frozen=True)
class Kernel:
    name: str
    kind: str  # "triton" or "cuda"
    line: int


@dataclass(frozen=True)
class StaticFacts:
    """What the static stage found. `syntax_error` set means nothing else could be read."""

    syntax_error: str | None = None
    has_model_new: bool = False
    kernels: tuple[Kernel, ...] = field(default_factory=tuple)
    cuda_globals: tuple[str, ...] = ()  # `__global__` functions in the candidate's CUDA source

    @property
    def device_kernel_names(self) -> set[str]:
        """Names the candidate's own kernels have on the device (Triton functions, CUDA globals)."""
        return set(self.triton_kernels) | set(self.cuda_globals)

    @property
    def triton_kernels(self) -> list[str]:
        return [k.name for k in self.kernels if k.kind == "triton"]

    @property
    def cuda_kernels(self) -> list[str]:
        return [k.name for k in self.kernels if k.kind == "cuda"]


def dotted_name(node: ast.AST) -> str:
    """'torch.utils.cpp_extension.load_inline' for that attribute chain (a call: its callee's)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{dotted_name(node.value)}.{node.attr}"
    if isinstance(node, ast.Call):
        return dotted_name(node.func)
    return ""


def _is_triton_decorator(dec: ast.AST) -> bool:
    name = dotted_name(dec)
    parts = name.split(".")
    return parts[-1] in TRITON_DECORATORS and (len(parts) == 1 or parts[0] in {"triton", "tl"})


def _load_inline_kernels(call: ast.Call) -> list[str]:
    """Names a `load_inline(...)` call exposes: its `functions=[...]` or, failing that, its `name=`."""
    names: list[str] = []
    for kw in call.keywords:
        if kw.arg == "functions" and isinstance(kw.value, (ast.List, ast.Tuple)):
            names += [e.value for e in kw.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        elif kw.arg == "functions" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
            names.append(kw.value.value)
    if not names:
        for kw in call.keywords:
            if kw.arg == "name" and isinstance(kw.value, ast.Constant):
                names.append(str(kw.value.value))
    return names or ["<load_inline>"]


def analyze(source: str) -> StaticFacts:
    """Parse a candidate and find `ModelNew` and its custom kernels (Triton @jit, CUDA load_inline)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        line = (exc.text or "").rstrip()
        where = f"line {exc.lineno}" + (f": {line.strip()}" if line else "")
        return StaticFacts(syntax_error=f"SyntaxError: {exc.msg} ({where})")
    kernels: list[Kernel] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if any(_is_triton_decorator(d) for d in node.decorator_list):
                kernels.append(Kernel(node.name, "triton", node.lineno))
        elif isinstance(node, ast.Call) and dotted_name(node.func).split(".")[-1] == "load_inline":
            kernels += [Kernel(n, "cuda", node.lineno) for n in _load_inline_kernels(node)]
    has_model_new = top_level_names(tree).get("ModelNew") is not None
    globals_ = tuple(
        dict.fromkeys(
            m.group(1) for m in _GLOBAL_FN.finditer(source) if m.group(1) not in ("void", "__launch_bounds__")
        )
    )
    return StaticFacts(has_model_new=has_model_new, kernels=tuple(kernels), cuda_globals=globals_)


@dataclass(frozen=True)
class Candidate:
    source: str
    name: str = "candidate"

    @classmethod
    def from_file(cls, path) -> Candidate:
        p = Path(path)
        source = read_source(p, "candidate", CandidateError)
        facts = analyze(source)
        if facts.syntax_error is None and not facts.has_model_new:
            raise CandidateError(f"{p} is not a candidate: no class ModelNew defined at top level")
        return cls(source=source, name=p.stem)

    @property
    def hash(self) -> str:
        """The program identity (kernelsmith.identity): comments and formatting do not count."""
        return program_hash(self.source)
