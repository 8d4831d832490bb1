"""A kernel's own graph in place of its operator in torch.compile's graph: Inductor then compiles the
kernel as it compiles a model whose source calls it (its torch ops fused with their neighbours, its Triton
kernels launched from Inductor's own code), with no operator call and no Python at run time. Torch only:
`kernelsmith apply` copies this file into the patch it writes.

The graph pass (graph_pass.py) puts each region's operator in the graph; a swapped forward traced by
Dynamo puts it there too. Then every call of an installed kernel's operator whose kernel traces is
replaced by the kernel's graph: `ModelNew`, bound to the call's parameters, traced on the call's fake
inputs as Inductor traces a model (make_fx with its decompositions, functionalized), each Triton kernel
its Python launches (`kernel[grid](...)`) wrapped by `torch.library.wrap_triton` while it is traced. A
kernel whose forward does anything else on the device (a C++ extension, ctypes, a raw launch) fails to
trace on fake tensors, and keeps its operator; so does one with tensors of its own beyond the model's
parameters, or an output laid out otherwise than the region's (`KernelOp.inline_why` says why).

Counts: an inlined kernel runs no Python, so it counts its regions once, when they go into a compiled
graph (the first forward of each compile), not at every call as its operator does.

KERNELSMITH_INLINE=0 in the environment keeps every kernel's operator (a way around a kernel whose graph
Inductor traces but cannot compile: say so in an issue).
"""

from __future__ import annotations

import ast
import inspect
import operator
import os
import sys
from contextlib import contextmanager

import torch
import torch.fx as fx
from torch._guards import detect_fake_mode

from .match import DERIVE
from .substitute import values_of


def _launched(module) -> dict[str, object] | None:
    """The Triton kernels the module's Python launches (`name[grid](...)`), by global name; None where
    one of them is also called inside a Triton kernel (wrapping it would break that kernel's compile)."""
    try:
        tree = ast.parse(inspect.getsource(module))
    except (OSError, TypeError, SyntaxError):
        return {}
    jitted = lambda f: any("jit" in ast.unparse(d) or "autotune" in ast.unparse(d) for d in f.decorator_list)
    launched, inside = set(), set()
    for fn in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
        for call in [n for n in ast.walk(fn) if isinstance(n, ast.Call)]:
            if isinstance(call.func, ast.Subscript) and isinstance(call.func.value, ast.Name) and not jitted(fn):
                launched.add(call.func.value.id)
            elif isinstance(call.func, ast.Name) and jitted(fn):
                inside.add(call.func.id)
    if launched & inside:
        return None
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction

    found = {n: getattr(module, n, None) for n in launched}
    return {n: k for n, k in found.items() if isinstance(k, (JITFunction, Autotuner))}


@contextmanager
def _wrapped(module, kernels: dict[str, object]):
    """The module's launched kernels wrapped by torch.library.wrap_triton while it is traced."""
    from torch.library import wrap_triton

    try:
        for name, kernel in kernels.items():
            setattr(module, name, wrap_triton(kernel))  # pyright: ignore[reportArgumentType]
        yield
    finally:
        for name, kernel in kernels.items():
            setattr(module, name, kernel)


def trace(kop, inputs: list, params: list) -> fx.GraphModule:
    """The kernel's graph on these (fake) inputs and parameters: placeholders inputs then parameters,
    outputs the region's values in the operator's order. Raises where the kernel does not trace."""
    from torch._dispatch.python import enable_python_dispatcher
    from torch._inductor.decomposition import select_decomp_table
    from torch.fx.experimental.proxy_tensor import make_fx

    kernel, attrs, n = kop.kernel.module, kop.kernel.attrs, len(inputs)
    state = dict(kernel.named_parameters()) | dict(kernel.named_buffers())
    names = [attrs[a] for a in kop.attrs]
    if set(state) - set(names):
        raise ValueError(f"ModelNew has tensors of its own ({', '.join(sorted(set(state) - set(names)))})")
    if callable(getattr(type(kernel), DERIVE, None)):  # made once per binding, not per call: its operator keeps them
        raise ValueError(f"ModelNew derives tensors from its parameters ({DERIVE})")
    module = sys.modules.get(type(kernel).__module__)
    kernels = _launched(module) if module is not None and "triton" in sys.modules else {}
    if kernels is None:
        raise ValueError("a Triton kernel its Python launches is also called inside a Triton kernel")

    def region(*flat):
        outs = torch.func.functional_call(kernel, dict(zip(names, flat[n:])), tuple(flat[:n]))
        values = values_of(kop.pattern, list(outs) if isinstance(outs, (tuple, list)) else [outs])
        result = []
        for base, (shape, stride, _) in zip(kop.bases, kop.out_meta):
            got = values[base]
            if tuple(got.stride()) != tuple(stride):
                if tuple(torch.empty(shape, device="meta").stride()) != tuple(stride):
                    raise ValueError("an output is laid out otherwise than the region's")
                got = got.contiguous()
            result.append(got)
        return tuple(result)

    fake = detect_fake_mode([*inputs, *params])
    with _wrapped(module, kernels or {}), enable_python_dispatcher(), fake if fake is not None else _nothing():
        functional = torch.func.functionalize(region, remove="mutations_and_views")
        return make_fx(functional, select_decomp_table(), tracing_mode="real")(*inputs, *params)


@contextmanager
def _nothing():
    yield


def inline_calls(graph: fx.Graph, kops: list) -> int:
    """Each call of these kernels' operators in the graph replaced by the kernel's own graph, where the
    kernel traces (kop.inline_why says why not); returns how many were."""
    if os.environ.get("KERNELSMITH_INLINE", "1") == "0":
        return 0
    by_op = {k.op: k for k in kops}
    done = 0
    for call in [n for n in graph.nodes if n.op == "call_function" and n.target in by_op]:
        kop = by_op[call.target]  # pyright: ignore[reportArgumentType]
        args = list(call.args[0]) + list(call.args[1])  # pyright: ignore[reportArgumentType]
        vals = [a.meta.get("val") for a in args]
        if kop.inline_why is not None or any(not isinstance(v, torch.Tensor) for v in vals):
            continue
        # sizes as ints: a dynamic size the region reads was specialized (graph_match.specialize), guarded here
        key = tuple((tuple(map(int, v.shape)), tuple(map(int, v.stride())), v.dtype, v.device) for v in vals)
        mode = detect_fake_mode(vals)
        cache = kop.inlined.setdefault(mode, {}) if mode is not None else {}
        traced = cache.get(key)
        if traced is None:
            try:
                traced = cache[key] = trace(kop, vals[: len(call.args[0])], vals[len(call.args[0]) :])
            except Exception as exc:  # noqa: BLE001 - whatever it raises, the kernel keeps its operator
                kop.inline_why = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
                continue
        _splice(graph, call, traced, args)
        kop.tally.fired += 1
        done += 1
    return done


def _splice(graph: fx.Graph, call: fx.Node, traced: fx.GraphModule, args: list) -> None:
    """The traced graph's nodes before `call`, its values in place of the call's; the call goes."""
    env: dict[fx.Node, fx.Node] = dict(zip(traced.graph.find_nodes(op="placeholder"), args))
    root = graph.owning_module
    with graph.inserting_before(call):
        for node in traced.graph.nodes:
            if node.op == "call_function":
                env[node] = graph.node_copy(node, lambda x: env[x])
            elif node.op == "get_attr":  # a constant make_fx lifted: kept on the compiled module
                name = f"_ks_inline_{len([k for k in vars(root) if k.startswith('_ks_inline_')])}"
                setattr(root, name, getattr(traced, node.target))  # pyright: ignore[reportArgumentType]
                env[node] = graph.get_attr(name)
                env[node].meta = dict(node.meta)
            elif node.op == "output":
                outs = [env[o] for o in node.args[0]]  # pyright: ignore[reportGeneralTypeIssues]
    for user in list(call.users):
        if user.op == "call_function" and user.target is operator.getitem:
            user.replace_all_uses_with(outs[user.args[1]])  # pyright: ignore[reportCallIssue, reportArgumentType]
            graph.erase_node(user)
    if not call.users:
        graph.erase_node(call)
