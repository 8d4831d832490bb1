"""The project's one program identity: "is this the same program" is decided by the syntax tree,
not the text, for tasks, candidates, stored programs, search dedup, SFT dedup, decontamination,
the reward's parent cache and the tuner's skeletons alike.

Two sources are equal when their ASTs are: comments, blank lines, indentation width, line breaks
inside brackets, quote style, redundant parentheses and docstrings do not count. Source that does
not parse falls back to its text with comments and blank lines dropped, so a broken program
still has a stable identity.

Under Triton's interpreter (a search on the CPU: `interpreted=True`) two programs that differ only
in launch options are one computation: the interpreter hands a kernel its own parameters and drops
every other keyword of a launch (triton/runtime/interpreter.py, GridExecutor.__call__), and
`triton.Config`'s options with them. So there they do not count either: a keyword of a launch
`K[grid](...)` that is not a parameter of the same file's `@triton.jit` kernel K (for a kernel
defined elsewhere, the options in INTERPRETER_DROPS), and INTERPRETER_DROPS in `triton.Config(...)`.
"""

from __future__ import annotations

import ast
import hashlib
import re

_WITH_DOCSTRING = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
# Launch options (Triton's CUDA options, and triton.Config's) that the interpreter never passes on.
INTERPRETER_DROPS = frozenset(
    {"num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion", "launch_cooperative_grid", "launch_pdl"}
)


def _drop_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if not isinstance(node, _WITH_DOCSTRING) or not node.body:
            continue
        first = node.body[0]
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            node.body = node.body[1:] or [ast.Pass()]
    return tree


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _kernel_params(tree: ast.Module) -> dict[str, set[str]]:
    """The file's `@triton.jit` functions (autotuned ones too) -> their parameter names."""
    kernels = {}
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        names = {_dotted(d.func if isinstance(d, ast.Call) else d) for d in node.decorator_list}
        if names & {"jit", "triton.jit"}:
            a = node.args
            kernels[node.name] = {p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)}
    return kernels


def _drop_interpreter_options(tree: ast.Module) -> ast.Module:
    """The keywords Triton's interpreter drops, dropped (the module docstring says which)."""
    kernels = _kernel_params(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        if isinstance(node.func, ast.Subscript):  # a launch K[grid](...)
            own = kernels.get(_dotted(node.func.value).rsplit(".", 1)[-1])
            if own is not None:
                node.keywords = [k for k in node.keywords if k.arg is None or k.arg in own]
                continue
        elif _dotted(node.func) not in ("triton.Config", "Config"):
            continue
        node.keywords = [k for k in node.keywords if k.arg not in INTERPRETER_DROPS]
    return tree


def normalized_code(code: str) -> str:
    """The text fallback: comments, blank lines and trailing spaces dropped."""
    lines = []
    for line in code.splitlines():
        line = re.sub(r"\s+#.*$", "", line).rstrip() if "#" in line else line.rstrip()
        if line.strip() and not line.lstrip().startswith("#"):
            lines.append(line)
    return "\n".join(lines)


def normalized_source(source: str, interpreted: bool = False) -> str:
    """`ast.dump` of the source without docstrings (no line numbers), and without the launch options
    Triton's interpreter drops when `interpreted`; the text fallback on a syntax error."""
    source = source.lstrip("\ufeff")
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):  # ValueError: a NUL byte in the source
        return "text:" + normalized_code(source)
    _drop_docstrings(tree)
    return ast.dump(_drop_interpreter_options(tree) if interpreted else tree)


def program_hash(source: str, interpreted: bool = False) -> str:
    """16 hex digits of the normalised source's SHA-256: the program's identity; `interpreted`: its
    identity under Triton's interpreter, where launch options do not count."""
    return hashlib.sha256(normalized_source(source, interpreted).encode("utf-8")).hexdigest()[:16]
