"""What a CUDA C++ (or C++) extension build is, as data: the arguments of one
`torch.utils.cpp_extension.load_inline` call that change what is built, in one canonical form, and
the content key of a build (those arguments plus the toolchain and GPU they are built for).

The same canonical form comes from two places that must agree: the candidate's source read
statically, before it runs (so a build can start ahead of the candidate's turn on the GPU), and
the call's real arguments inside the sandbox (so the sandbox finds that build). A call whose
arguments cannot be read statically is simply built inside the sandbox, as before.
"""

from __future__ import annotations

import ast
import hashlib
import json
import textwrap

from kernelsmith.candidate import dotted_name

# load_inline's parameters that change the built library, with their defaults; the three first
# are the only ones we accept positionally (their order is the same in every torch 2.x).
_DEFAULTS: dict[str, object] = {
    "name": None,
    "cpp_sources": None,
    "cuda_sources": None,
    "functions": None,
    "extra_cflags": None,
    "extra_cuda_cflags": None,
    "extra_ldflags": None,
    "extra_include_paths": None,
    "with_cuda": None,
    "is_python_module": True,
    "with_pytorch_error_handling": True,
    "use_pch": False,
    "no_implicit_headers": False,
}
_POSITIONAL = ("name", "cpp_sources", "cuda_sources")
_IGNORED = {"build_directory", "verbose", "keep_intermediates"}  # where and how loudly: not what
_SYCL = {"sycl_sources", "extra_sycl_cflags", "with_sycl"}  # not built ahead (no SYCL toolchain here)
_LISTS = ("cpp_sources", "cuda_sources", "extra_cflags", "extra_cuda_cflags", "extra_ldflags", "extra_include_paths")
_BOOLS = ("is_python_module", "with_pytorch_error_handling", "use_pch", "no_implicit_headers")


def _str_list(value) -> list[str] | None:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return list(value)
    return None


def canonical(arguments: dict) -> dict | None:
    """The canonical spec of a load_inline call given its arguments by name, or None when it
    cannot be built ahead (an argument of another type, SYCL, a library that is not a Python
    module, an unknown parameter)."""
    spec: dict[str, object] = {}
    for key, value in arguments.items():
        if key in _IGNORED:
            continue
        if key in _SYCL:
            if value in (None, [], "", False):
                continue
            return None
        if key not in _DEFAULTS:
            return None
        spec[key] = value
    if not isinstance(spec.get("name"), str) or not spec["name"]:
        return None
    out: dict[str, object] = {"name": spec["name"]}
    for key in _LISTS:
        items = _str_list(spec.get(key))
        if items is None:
            return None
        out[key] = items
    functions = spec.get("functions")
    if isinstance(functions, dict):
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in functions.items()):
            return None
        out["functions"] = [[k, v] for k, v in functions.items()]
    elif functions is None:
        out["functions"] = None
    else:
        names = _str_list(functions)
        if names is None:
            return None
        out["functions"] = names
    with_cuda = spec.get("with_cuda")
    if with_cuda is not None and not isinstance(with_cuda, bool):
        return None
    out["with_cuda"] = with_cuda
    for key in _BOOLS:
        value = spec.get(key, _DEFAULTS[key])
        if not isinstance(value, bool):
            return None
        out[key] = value
    if out["is_python_module"] is not True:
        return None
    return out


def load_inline_kwargs(spec: dict) -> dict:
    """The keyword arguments that rebuild `spec` with load_inline."""
    kwargs = {k: v for k, v in spec.items() if k != "functions"}
    functions = spec.get("functions")
    if functions is not None and functions and isinstance(functions[0], list):
        kwargs["functions"] = {k: v for k, v in functions}
    else:
        kwargs["functions"] = functions
    return kwargs


def build_key(spec: dict, env: dict) -> str:
    """The content key of a build: the spec and the toolchain / GPU it is built for."""
    blob = json.dumps({"spec": spec, "env": env}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def bind_call(args: tuple, kwargs: dict) -> dict | None:
    """A runtime call's arguments by name (the sandbox's side of `static_specs`)."""
    if len(args) > len(_POSITIONAL):
        return None
    named = dict(zip(_POSITIONAL, args))
    if set(named) & set(kwargs):
        return None
    return {**named, **kwargs}


# -- the candidate's source, read without running it -------------------------------------------


class _Unknown(Exception):
    pass


class _Reader:
    """Evaluates the few expression forms that build source strings (literals, concatenation,
    f-strings without fields, join, strip, dedent, replace, names bound once at module level)."""

    MAX_DEPTH = 40

    def __init__(self, tree: ast.Module):
        self.bound: dict[str, ast.expr] = {}
        stores: dict[str, int] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                stores[node.id] = stores.get(node.id, 0) + 1
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                stores[node.name] = stores.get(node.name, 0) + 1
            elif isinstance(node, ast.alias):
                name = (node.asname or node.name).split(".")[0]
                stores[name] = stores.get(name, 0) + 1
        for stmt in tree.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                self.bound[stmt.targets[0].id] = stmt.value
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
                self.bound[stmt.target.id] = stmt.value
        # A name bound anywhere else as well (reassigned, augmented, a loop variable) is not known.
        self.bound = {k: v for k, v in self.bound.items() if stores.get(k) == 1}

    def value(self, node: ast.expr, depth: int = 0):
        if depth > self.MAX_DEPTH:
            raise _Unknown
        d = depth + 1
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, bool, int, type(None))):
            return node.value
        if isinstance(node, ast.JoinedStr):
            parts = []
            for part in node.values:
                if not isinstance(part, ast.Constant):
                    raise _Unknown
                parts.append(part.value)
            return "".join(parts)
        if isinstance(node, (ast.List, ast.Tuple)):
            return [self.value(e, d) for e in node.elts]
        if isinstance(node, ast.Dict):
            if any(k is None for k in node.keys):
                raise _Unknown
            return {self.value(k, d): self.value(v, d) for k, v in zip(node.keys, node.values)}  # type: ignore[arg-type]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.value(node.left, d), self.value(node.right, d)
            if type(left) is not type(right) or not isinstance(left, (str, list)):
                raise _Unknown
            return left + right
        if isinstance(node, ast.Name) and node.id in self.bound:
            return self.value(self.bound[node.id], d)
        if isinstance(node, ast.Call):
            return self._call(node, d)
        raise _Unknown

    def _call(self, node: ast.Call, depth: int):
        if any(isinstance(a, ast.Starred) for a in node.args) or node.keywords:
            raise _Unknown
        func = node.func
        args = [self.value(a, depth) for a in node.args]
        if isinstance(func, ast.Attribute):
            if dotted_name(func) in ("textwrap.dedent",) and len(args) == 1 and isinstance(args[0], str):
                return textwrap.dedent(args[0])
            base = self.value(func.value, depth)
            if isinstance(base, str):
                if func.attr in ("strip", "lstrip", "rstrip") and all(isinstance(a, str) for a in args):
                    return getattr(base, func.attr)(*args)
                if func.attr == "join" and len(args) == 1 and _str_list(args[0]) is not None:
                    return base.join(args[0])
                if func.attr == "replace" and len(args) == 2 and all(isinstance(a, str) for a in args):
                    return base.replace(args[0], args[1])
        elif isinstance(func, ast.Name) and func.id == "dedent" and len(args) == 1 and isinstance(args[0], str):
            return textwrap.dedent(args[0])
        raise _Unknown


def static_specs(source: str) -> list[dict]:
    """The canonical specs of the candidate's `load_inline` calls whose arguments are plain data in
    the source (anywhere in it: at module level or in ModelNew). Calls that need the candidate to
    run are left out: the sandbox builds those itself."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    reader = _Reader(tree)
    specs: list[dict] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and dotted_name(node.func).split(".")[-1] == "load_inline"):
            continue
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            continue
        try:
            args = tuple(reader.value(a) for a in node.args)
            kwargs = {k.arg: reader.value(k.value) for k in node.keywords if k.arg is not None}
        except (_Unknown, TypeError, ValueError, RecursionError):
            continue
        named = bind_call(args, kwargs)
        spec = canonical(named) if named is not None else None
        if spec is not None and spec not in specs:
            specs.append(spec)
    return specs
