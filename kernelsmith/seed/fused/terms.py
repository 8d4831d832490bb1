"""A fused task's forward read as terms: what each value computes, as a nested tuple over the task's inputs and
parameters, with the patterns our kernels implement folded into one term each (an RMSNorm, a SiLU-mul, a GEMM
with a weight). Views, aliases and dtype casts keep their argument's term (our kernels round where the model
rounds), so two views of one activation are the same term. Any op outside this vocabulary makes the forward
unreadable (None): its task gets no seed of ours.

    ("in", "x0")                         an input; ("T", term, d0, d1) an input's transpose
    ("add", a, b)                        a + b, both tensors
    ("norm", x, "weight_name", eps)      weight * (x * rsqrt(mean(x^2, -1) + eps))
    ("silumul", a, b)                    silu(a) * b
    ("mm", a, "weight_name")             a @ weight.t()
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

Term = tuple

PASS_THROUGH = frozenset({"view", "_unsafe_view", "alias", "_to_copy", "reshape", "clone", "contiguous"})


@dataclass
class Forward:
    args: list[str]  # the forward's inputs, in order
    outputs: list[Term]  # the term of each returned value, in order
    ranks: list[int]  # each returned value's rank (its sizes are the call's: a task is judged at each of its SHAPES)
    order: list[Term]  # every term as the forward first makes it (the GEMMs' order)
    arg_ranks: list[int]  # each input's rank


def _model_forward(source: str) -> ast.FunctionDef | None:
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "forward":
                    return item
    return None


def _op(call: ast.expr) -> str | None:
    """`torch.ops.aten.OP.overload(...)` -> OP."""
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute):
        return None
    op = call.func.value
    if not isinstance(op, ast.Attribute) or ast.unparse(op.value) != "torch.ops.aten":
        return None
    return op.attr


class _Reader:
    def __init__(self, args: list[str], ranks: dict[str, int]):
        self.terms: dict[str, Term] = {a: ("in", a) for a in args}
        self.ranks: dict[str, int] = dict(ranks)
        self.order: list[Term] = []

    def value(self, node: ast.expr) -> Term:
        if isinstance(node, ast.Name):
            return self.terms[node.id]
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            return ("p", node.attr)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return ("c", node.value)
        raise ValueError(ast.unparse(node))

    def assign(self, name: str, call: ast.Call) -> None:
        op = _op(call)
        args = call.args
        if op is None or not args:
            raise ValueError(ast.unparse(call))
        term = self.compute(op, args)
        self.terms[name] = term
        self.ranks[name] = self.rank_of(op, args, term)
        if term not in self.order:
            self.order.append(term)

    def compute(self, op: str, args: list[ast.expr]) -> Term:
        a = self.value(args[0])
        b = self.value(args[1]) if len(args) > 1 and op in ("t", "transpose", "mm", "pow", "add", "mul") else None
        if op in PASS_THROUGH:
            return a
        if op == "t" and a[0] == "p":
            return ("wt", a[1])
        if op == "transpose" and a[0] == "in" and b is not None:
            return ("T", a, b[1], self.value(args[2])[1])
        if op == "mm" and b is not None and b[0] == "wt":
            return ("mm", a, b[1])
        if op == "mean" and (len(args) < 2 or ast.literal_eval(args[1]) != [-1]):
            raise ValueError("mean")
        if op in ("pow", "mean", "rsqrt", "silu"):
            if op == "pow" and b != ("c", 2):
                raise ValueError("pow")
            return (op, a)
        if op == "add" and b is not None:
            return ("addc", a, b[1]) if b[0] == "c" else ("add", a, b)
        if op == "mul" and b is not None:
            return _mul(a, b)
        raise ValueError(op)

    def rank_of(self, op: str, args: list[ast.expr], term: Term) -> int:
        if op in ("view", "_unsafe_view", "reshape") and len(args) > 1 and isinstance(args[1], (ast.List, ast.Tuple)):
            return len(args[1].elts)
        if term[0] == "mm":
            return 2
        tensors = [a.id for a in args if isinstance(a, ast.Name)]
        return self.ranks[tensors[0]] if tensors else 2  # a weight's transpose


def _mul(a: Term, b: Term) -> Term:
    for x, y in ((a, b), (b, a)):
        if x[0] == "silu":
            return ("silumul", x[1], y)
        # x * rsqrt(mean(x^2) + eps)
        if y[0] == "rsqrt" and y[1][0] == "addc" and y[1][1] == ("mean", ("pow", x)):
            return ("normed", x, y[1][2])
        if x[0] == "p" and y[0] == "normed":
            return ("norm", y[1], x[1], y[2])
    return ("mul", a, b)


def _input_ranks(source: str, args: list[str]) -> dict[str, int]:
    """Each input's rank from the task's header (`x0: float32[2, 1, 64] stride ...`)."""
    ranks = {}
    for a in args:
        found = re.search(rf"^{re.escape(a)}: \w+\[([^\]]*)\]", source, re.M)
        if found is not None:
            ranks[a] = len(found[1].split(","))
    return ranks


def read_forward(source: str) -> Forward | None:
    """The task's forward as terms, or None where it holds an op these seeds do not know."""
    fn = _model_forward(source)
    if fn is None:
        return None
    args = [a.arg for a in fn.args.args[1:]]
    reader = _Reader(args, _input_ranks(source, args))
    returned: list[ast.expr] = []
    try:
        for stmt in fn.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                if not isinstance(stmt.value, ast.Call):
                    return None
                reader.assign(stmt.targets[0].id, stmt.value)
            elif isinstance(stmt, ast.Return) and stmt.value is not None:
                returned = list(stmt.value.elts) if isinstance(stmt.value, ast.Tuple) else [stmt.value]
            else:
                return None
        names = [r.id for r in returned if isinstance(r, ast.Name)]
        if len(names) != len(returned) or not names:
            return None
        return Forward(
            args,
            [reader.terms[n] for n in names],
            [reader.ranks[n] for n in names],
            reader.order,
            [reader.ranks[a] for a in args],
        )
    except (ValueError, KeyError, IndexError):
        return None
