"""A flashinfer-bench Solution as a KernelBench candidate: its entry file's code, then a ModelNew with the
imported task's constructor whose forward calls the entry point on the Definition's inputs.

Python and Triton Solutions of one file become the candidate as written. CUDA or C++ Solutions with the
`torch` binding are built by torch's load_inline inside the candidate (headers written beside it); those
with the `tvm-ffi` binding (flashinfer-bench's default) or in TileLang, and Python of several files, are
not candidates kernelsmith can judge: `Unmappable` says why. A destination-passing Solution gets its
outputs allocated from the Definition's axes, bound from the inputs' shapes as flashinfer-bench binds them.
The Solution's own traces are not read: the evaluator judges the candidate as any other.
"""

from __future__ import annotations

import ast
import re

from flashinfer_bench.data import Definition, Solution

from kernelsmith.errors import UserError
from kernelsmith.fib.codegen import as_outputs, ident, literal
from kernelsmith.fib.dtypes import Unmappable, name_of
from kernelsmith.fib.reference import rename

CPP = (".cpp", ".cc", ".cxx", ".c")
WRAPPER_NAMES = {"ModelNew", "_as_outputs", "_OUTPUTS", "_OUTPUT_DTYPES"}  # what the candidate defines after the code
CUDA = (".cu",)
HEADERS = (".h", ".hpp", ".cuh", ".inc")


def _entry(solution: Solution) -> tuple[str, str, str]:
    """(entry file, symbol, its content); a UserError when the entry file or its symbol is missing."""
    path, symbol = solution.spec.entry_point.split("::")
    source = solution.get_entry_source()
    if source is None:  # flashinfer-bench's own validation refuses this too
        raise UserError(f"solution {solution.name}: its entry point {solution.spec.entry_point}: no source file {path}")
    return path, symbol, source.content


def _python_has(content: str, symbol: str) -> bool | None:
    """Whether a Python file binds `symbol` at top level; None when it does not parse (the evaluator then
    says `compile_error`, as for any candidate)."""
    try:
        tree = ast.parse(content)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == symbol:
            return True
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == symbol for t in targets):
                return True
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if any((a.asname or a.name.split(".")[0]) == symbol for a in node.names):
                return True
    return False


def _python(solution: Solution) -> tuple[str, str]:
    path, symbol, content = _entry(solution)
    if not path.endswith(".py"):
        raise Unmappable(
            f"solution {solution.name}: a {solution.spec.language.value} entry file must be .py, not {path}"
        )
    others = [s.path for s in solution.sources if s.path != path]
    if others:
        raise Unmappable(
            f"solution {solution.name}: {len(solution.sources)} source files ({', '.join(others[:3])} besides {path}); "
            "a candidate is one file"
        )
    found = _python_has(content, symbol)
    if found is False:
        raise UserError(
            f"solution {solution.name}: its entry point {solution.spec.entry_point}: {path} defines no {symbol}"
        )
    if found:  # a Solution kernelsmith exported holds a ModelNew of its own: the wrapper's is another
        content = rename(content, WRAPPER_NAMES, "_solution")
        symbol = "_solution" + symbol if symbol in WRAPPER_NAMES else symbol
    return content.rstrip() + "\n", symbol


def _native(solution: Solution) -> tuple[str, str]:
    """A CUDA or C++ Solution with the torch binding, built with load_inline in the candidate."""
    binding = solution.spec.binding.value if solution.spec.binding is not None else "tvm-ffi"
    if binding != "torch":
        raise Unmappable(
            f"solution {solution.name}: binding {binding} (apache-tvm-ffi); kernelsmith builds C++ through torch's "
            "load_inline, so only the torch binding is judged"
        )
    path, symbol, content = _entry(solution)
    if not re.search(rf"\b{re.escape(symbol)}\b", content):
        raise UserError(
            f"solution {solution.name}: its entry point {solution.spec.entry_point}: {path} has no {symbol}"
        )
    by_kind: dict[str, list[str]] = {"cpp": [], "cuda": [], "header": []}
    for s in solution.sources:
        kind = "cuda" if s.path.endswith(CUDA) else "cpp" if s.path.endswith(CPP) else "header"
        by_kind[kind].append(s.path)
    files = {s.path: s.content for s in solution.sources}
    name = ident(f"fib_{solution.name}")
    code = f'''import os
import tempfile

import torch
from torch.utils.cpp_extension import load_inline

_FILES = {literal(files)}


def _build():
    # headers (and every file) beside each other, where the sources' #include finds them
    include = tempfile.mkdtemp(prefix="fib_")
    for path, text in _FILES.items():
        os.makedirs(os.path.dirname(os.path.join(include, path)), exist_ok=True)
        with open(os.path.join(include, path), "w") as f:
            f.write(text)
    return load_inline(
        name={name!r},
        cpp_sources=[_FILES[p] for p in {literal(by_kind["cpp"])}],
        cuda_sources=[_FILES[p] for p in {literal(by_kind["cuda"])}] or None,
        extra_include_paths=[include],
        with_cuda={bool(by_kind["cuda"])!r},
    )


_extension = _build()
{ident(symbol)} = _extension.{symbol}
'''
    return code, ident(symbol)


def _dps_outputs(definition: Definition, solution: Solution) -> str:
    """Code allocating a destination-passing Solution's outputs from the inputs' shapes (flashinfer-bench's
    var_axes_bindings: an axis's size is the first input dimension that has it). Written out, not a call of
    its Definition.get_output_shapes: the candidate runs in the evaluator's sandbox, where flashinfer-bench
    may be absent."""
    bindings = definition.var_axes_bindings
    names = list(definition.inputs)
    shapes = []
    for out_name, spec in definition.outputs.items():
        dims = []
        for axis in spec.shape or []:
            a = definition.axes[axis]
            if a.type == "const":
                dims.append(str(a.value))
            elif axis in bindings:
                tensor, dim = bindings[axis]
                dims.append(f"args[{names.index(tensor)}].shape[{dim}]")
            else:
                raise Unmappable(
                    f"solution {solution.name} passes its outputs, and output {out_name}'s axis {axis} is no input's"
                )
        shape = "(" + "".join(d + ", " for d in dims) + ")"
        shapes.append(f"torch.empty({shape}, dtype=torch.{name_of(spec.dtype)}, device=device)")
    return "[" + ", ".join(shapes) + "]"


def candidate_text(definition: Definition, solution: Solution, inputs: list[tuple[str, bool]]) -> str:
    """The candidate for `solution`; `inputs`: the imported task's (identifier, is a tensor) in the
    Definition's order (its tensors are forward's arguments, its scalars the constructor's)."""
    if solution.definition != definition.name:
        raise UserError(f"solution {solution.name} is for {solution.definition}, not {definition.name}")
    language = solution.spec.language.value
    if language in ("python", "triton"):
        code, entry = _python(solution)
    elif language in ("cuda", "cpp"):
        code, entry = _native(solution)
    else:
        raise Unmappable(f"solution {solution.name}: {language} is a language kernelsmith does not build")
    scalars = [n for n, tensor in inputs if not tensor]
    tensors = [n for n, tensor in inputs if tensor]
    args = ", ".join(n if tensor else f"self.{n}" for n, tensor in inputs)
    call = f"_as_outputs({entry}({args}))"
    if solution.spec.destination_passing_style:
        call = (
            f"args = ({args}{',' if len(inputs) == 1 else ''})\n"
            f"        device = next((a.device for a in args if isinstance(a, torch.Tensor)), None)\n"
            f"        outputs = {_dps_outputs(definition, solution)}\n"
            f"        {entry}(*args, *outputs)\n"
            f"        return _as_outputs(tuple(outputs))"
        )
    else:
        call = "return " + call
    header = (
        f"# kernelsmith: flashinfer-bench Solution {solution.name} by {solution.author} ({language}, "
        f"{'destination-passing' if solution.spec.destination_passing_style else 'value-returning'}) for "
        f"{definition.name},\n# its entry point {solution.spec.entry_point}; imported by `kernelsmith import-fib`.\n"
    )
    init = "".join(f", {n}" for n in scalars)
    sets = "".join(f"        self.{n} = {n}\n" for n in scalars) or "        pass\n"
    model = (
        "\n\nclass ModelNew(torch.nn.Module):\n"
        f"    def __init__(self{init}):\n        super().__init__()\n{sets}\n"
        f"    def forward(self{''.join(', ' + n for n in tensors)}):\n        {call}\n"
    )
    outputs = as_outputs(list(definition.outputs), [name_of(s.dtype) for s in definition.outputs.values()])
    wrapper = "# ---- kernelsmith: the imported task's ModelNew around the entry point ----\nimport torch\n"
    return f"{header}{code}\n\n{wrapper}{outputs}{model}"
