"""A region that is the whole of a module's forward (a norm, an activation) served by swapping that
module's forward for one that calls the kernel's operator, as Liger-Kernel swaps modules: no dispatch
mode, no per-op cost, and torch.compile traces straight into the operator. Torch only: `kernelsmith
apply` copies this file into the patch it writes.

Whole: the module's forward, run on the region's recorded inputs under the pattern's recorder, runs the
region's ops in order, at least up to its last compute op (the views after it may be the next module's),
reads nothing but those inputs and the module's own parameters and buffers, and returns one of the
values the region makes. The swapped forward keeps the module's parameters (it passes them to the
operator at each call) and runs the module's own forward where the call is not the region's (other
shapes, strides or dtypes; keyword arguments), where the patch is inactive, and where autograd records
the call (grad enabled and an input or parameter requires grad: a patch never changes gradients).
`restore` puts the module's forward back.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import torch

from .kernel_op import COMPILED, KernelOp
from .pattern import Slot, Step, Tracer


def _same_step(ours: Step, theirs: Step, names: dict[str, str]) -> bool:
    """The module's step is the region's, its parameters named `names` (region's -> module's), which this
    comparison extends."""

    def same(a, b) -> bool:
        if isinstance(a, Slot) or isinstance(b, Slot):
            if not (isinstance(a, Slot) and isinstance(b, Slot) and a.kind == b.kind):
                return False
            if a.kind != "param":
                return a == b
            return names.setdefault(b.key, a.key) == a.key
        if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
            return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
        if isinstance(a, dict) and isinstance(b, dict):
            return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
        return type(a) is type(b) and a == b

    return (
        ours.func is theirs.func
        and same(ours.args, theirs.args)
        and ours.out == theirs.out
        and ours.out_meta == theirs.out_meta
        and not ours.aliases
    )


def whole(kop: KernelOp, module: torch.nn.Module) -> tuple[int, list[str]] | None:
    """(which of the operator's values the module returns, the module's tensors in the operator's
    parameter order) when the region is the whole of the module's forward; None otherwise."""
    pattern = kop.pattern
    state = dict(module.named_parameters()) | dict(module.named_buffers())
    slots = {id(t): Slot("in", k) for k, t in enumerate(kop.sample)}
    slots |= {id(t): Slot("param", name) for name, t in state.items()}
    tracer = Tracer(slots, [])
    try:
        with torch.no_grad(), tracer:
            out = module.forward(*kop.sample)
    except Exception:  # the forward takes other arguments than the region's inputs: not the region's
        return None
    steps = tracer.steps
    names: dict[str, str] = {}  # the region's parameter -> the module's tensor
    if len(steps) <= pattern.last or len(steps) > len(pattern.steps):
        return None
    if not all(_same_step(ours, theirs, names) for ours, theirs in zip(steps, pattern.steps)):
        return None
    made = slots.get(id(out)) if isinstance(out, torch.Tensor) else None
    if made is None or made not in kop.bases or set(names) != set(pattern.params):
        return None
    return kop.bases.index(made), [names[a] for a in kop.attrs]


class _Unset:
    def __repr__(self) -> str:
        return "<the original's default>"


_UNSET = _Unset()


def forwarding(original: Callable, body: Callable, by_name: bool) -> Callable:
    """A function with `original`'s parameters (names and kinds; a default stands for the original's)
    that calls `body` with the arguments it was given, as given: the positional-only ones and *args in
    order, the others by name (`by_name`) or, up to the first one not given, in order. What reads a
    forward's signature (Hugging Face's generate reads `model.forward`'s) sees the original's names, and
    torch.compile, which binds a call by the function's own parameters, binds it right (`__signature__`
    or functools.wraps on a (*args, **kwargs) function would make it bind the arguments to the wrong
    names); a decorator of the original that reads its **kwargs sees what the caller passed."""
    names: dict[str, object] = {"__ks_body": body, "__ks_unset": _UNSET, "__ks_pass": _pass}
    params, leading, middle, keywords, extra, more = [], [], [], [], "()", "{}"
    parameters = list(inspect.signature(original).parameters.values())
    for i, p in enumerate(parameters):
        default = "" if p.default is p.empty else "=__ks_unset"
        if p.kind is p.VAR_POSITIONAL:
            params.append(f"*{p.name}")
            extra = p.name
        elif p.kind is p.VAR_KEYWORD:
            params.append(f"**{p.name}")
            more = p.name
        elif p.kind is p.KEYWORD_ONLY:
            if not any(q.kind is q.VAR_POSITIONAL for q in parameters) and "*" not in params:
                params.append("*")
            params.append(p.name + default)
            keywords.append(f"({p.name!r}, {p.name})")
        else:
            params.append(p.name + default)
            (leading if p.kind is p.POSITIONAL_ONLY else middle).append(
                p.name if p.kind is p.POSITIONAL_ONLY else f"({p.name!r}, {p.name})"
            )
            if p.kind is p.POSITIONAL_ONLY and (
                i + 1 == len(parameters) or parameters[i + 1].kind is not p.POSITIONAL_ONLY
            ):
                params.append("/")
    call = f"__ks_body, [{', '.join(leading)}], [{', '.join(middle)}], {extra}, [{', '.join(keywords)}], {more}"
    source = f"def forward({', '.join(params)}):\n    return __ks_pass({call}, {by_name})\n"
    exec(compile(source, f"<kernelsmith forward of {getattr(original, '__qualname__', 'a module')}>", "exec"), names)
    return names["forward"]  # pyright: ignore[reportReturnType]


def _pass(body: Callable, leading: list, middle: list, extra: tuple, keywords: list, more: dict, by_name: bool):
    """`body` called with the arguments a forwarding function was given (forwarding's words)."""
    args = [v for v in leading if v is not _UNSET]
    kwargs = {}
    given = [(k, v) for k, v in middle if v is not _UNSET]
    if extra or not by_name:
        ordered = len(given) == len(middle) or extra
        prefix = middle if ordered else middle[: next(i for i, (_, v) in enumerate(middle) if v is _UNSET)]
        args += [v for _, v in prefix]
        kwargs.update({k: v for k, v in middle[len(prefix) :] if v is not _UNSET})
    else:
        kwargs.update(given)
    kwargs.update({k: v for k, v in keywords if v is not _UNSET})
    kwargs.update(more)
    return body(*args, *extra, **kwargs)


class Swap:
    """A module whose forward calls a kernel's operator."""

    def __init__(
        self, module: torch.nn.Module, kop: KernelOp, index: int, names: list[str], live: Callable[[], bool], path: str
    ):
        self.module, self.kop, self.index, self.path = module, kop, index, path
        self.owners = [_owner(module, n) for n in names]  # (module, attribute) of each parameter
        self.had = "forward" in module.__dict__
        self.before = module.__dict__.get("forward")
        original = module.forward
        metas = [tuple(m) for m in kop.pattern.input_meta]
        fast = _direct_forward(original, kop, index, metas, self.owners, live)
        if fast is not None:
            module.forward = fast
            return
        n = len(metas)
        mode = kop.dispatch

        def body(*args, **kwargs):
            # under torch.compile, a kernel that does not serve every compiled mode is left to the graph pass,
            # which knows the compile's mode (kernel_op.compiled_mode)
            if kwargs or len(args) != n or not live() or (torch.compiler.is_compiling() and not COMPILED <= kop.modes):
                return original(*args, **kwargs)
            for x, (shape, stride, dtype) in zip(args, metas):
                if not isinstance(x, torch.Tensor) or x.shape != shape or x.stride() != stride or x.dtype != dtype:
                    return original(*args)
            params = [getattr(owner, attr) for owner, attr in self.owners]
            if torch.is_grad_enabled() and any(t.requires_grad for t in (*args, *params)):
                if not torch.compiler.is_compiling():
                    mode.recorded(kop.name)  # counted, and said once: the model's own ops run
                return original(*args)
            return kop.call(list(args), params)[index]

        module.forward = forwarding(original, body, by_name=False)

    def restore(self) -> None:
        if self.had:
            self.module.__dict__["forward"] = self.before
        else:
            del self.module.forward


_DIRECT = """def forward({args}):
    if __ks_compiling():  # the graph pass finds the region in torch.compile's graph (fewer guards a call)
        return __ks_original({names})
    if __ks_live(){checks}:
        {params}
        if __ks_grad() and ({grads}):
            return __ks_recorded({names})
        return __ks_call([{names}], [{values}])[{index}]
    return __ks_original({names})
"""


def _direct_forward(original: Callable, kop: KernelOp, index: int, metas: list, owners: list, live) -> Callable | None:
    """The swapped forward as code of its own, where the original takes exactly the region's inputs, by
    position or name, none defaulted: each call checks the inputs' layout and autograd in a few lines,
    reads each parameter as the module reads it, and calls the kernel. Under torch.compile it runs the
    module's own forward: the graph pass finds the region in the graph (a swapped forward traced there
    costs guards a call: docs/benchmarks.md). Hand-written because it is
    the patch's hot path (a forward per region per step; docs/benchmarks.md, host cost). None: another
    signature (forwarding's general wrapper serves it)."""
    params = list(inspect.signature(original).parameters.values())
    if len(params) != len(metas) or any(
        p.kind is not p.POSITIONAL_OR_KEYWORD or p.default is not p.empty for p in params
    ):
        return None
    names = [p.name for p in params]
    if any(n.startswith("__ks_") for n in names):
        return None
    space: dict[str, object] = {
        "__ks_live": live,
        "__ks_compiling": torch.compiler.is_compiling,
        "__ks_grad": torch.is_grad_enabled,
        "__ks_call": kop.call,
        "__ks_original": original,
        "__ks_tensor": torch.Tensor,
    }
    checks = []
    for k, (name, (shape, stride, dtype)) in enumerate(zip(names, metas)):
        space |= {f"__ks_shape{k}": torch.Size(shape), f"__ks_stride{k}": tuple(stride), f"__ks_dtype{k}": dtype}
        checks.append(
            f" and type({name}) is __ks_tensor and {name}.dtype is __ks_dtype{k} and {name}.shape == __ks_shape{k}"
            f" and {name}.stride() == __ks_stride{k}"
        )
    reads = []
    for k, (owner, attr) in enumerate(owners):  # read as the module reads it: torch.compile then knows it as
        space[f"__ks_owner{k}"] = owner  # the module's parameter (a guard less per parameter)
        reads.append(
            f"__ks_p{k} = __ks_owner{k}.{attr}"
            if attr.isidentifier()
            else f"__ks_p{k} = getattr(__ks_owner{k}, {attr!r})"
        )
    values = [f"__ks_p{k}" for k in range(len(owners))]
    mode = kop.dispatch

    def recorded(*args):
        if not torch.compiler.is_compiling():
            mode.recorded(kop.name)  # counted, and said once: the model's own ops run
        return original(*args)

    space["__ks_recorded"] = recorded
    grads = " or ".join(f"{v}.requires_grad" for v in [*names, *values])
    source = _DIRECT.format(
        args=", ".join(names),
        checks="".join(checks),
        params="; ".join(reads) or "pass",
        grads=grads,
        names=", ".join(names),
        values=", ".join(values),
        index=index,
    )
    exec(compile(source, f"<kernelsmith forward of {getattr(original, '__qualname__', 'a module')}>", "exec"), space)
    return space["forward"]  # pyright: ignore[reportReturnType]


def _owner(module: torch.nn.Module, name: str) -> tuple[torch.nn.Module, str]:
    path, _, attr = name.rpartition(".")
    return (module.get_submodule(path) if path else module), attr
