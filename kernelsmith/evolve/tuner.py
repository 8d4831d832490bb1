"""An LLM-free mutation operator: retune the launch parameters of a Triton candidate.

Only integer literals are edited, through libcst, so everything else in the file stays
byte-identical and a tuned child differs from its parent in those literals alone. A literal is
tunable when it reaches a `@triton.jit` kernel of the same file at a launch `K[grid](...)`:
  * "block": a `tl.constexpr` keyword whose value is a power-of-two int, written at the launch
    (`BLOCK=1024`) or bound once in the launching function (`BLOCK = 1024`; then the assignment
    is edited so the grid's `triton.cdiv(n, BLOCK)` stays consistent; `B_M, B_N = 64, 32` too).
    An inline grid literal equal to a literal keyword (`K[(cdiv(n, 4096),)](..., BLOCK=4096)`)
    is the same quantity written twice and is edited with it;
  * "num_warps" / "num_stages": keyword literals already at the launch. Absent ones are not
    added: adding one would change the skeleton (the tuned child would lose its family) and
    would clash with `@triton.autotune`, which owns them.
Values computed at run time, kernel parameter defaults and anything `@triton.autotune` or
`@triton.heuristics` sets are not the caller's to tune.
"""

from __future__ import annotations

import functools
import itertools
import random
import re
from collections import defaultdict
from dataclasses import dataclass
from typing import cast

import libcst as cst
import libcst.matchers as m

from kernelsmith.identity import program_hash

NUM_WARPS = (1, 2, 4, 8, 16)
NUM_STAGES = (1, 2, 3, 4, 5)
BLOCK_FLOOR, BLOCK_CAP = 16, 16384
DOT_CAP = 256  # tl.dot tiles: larger ones exceed registers/shared memory on current GPUs
# Shared memory, roughly: A, B and C tiles of a matmul with three 128-wide dimensions (fp32
# C, fp16 A/B, a couple of pipeline stages) is about what an H100/A100 SM holds. So for a
# kernel calling tl.dot, BLOCK_M*BLOCK_N + BLOCK_N*BLOCK_K + BLOCK_M*BLOCK_K <= 3*128*128,
# summed over pairs of its tunable BLOCK* parameters at one launch.
DOT_AREA_BOUND = 3 * 128 * 128
ENUMERATE_LIMIT = 200_000  # beyond this many configs, random ones are sampled, not listed
SAMPLE_TRIES = 2_000
_DOT_NAME = re.compile(r"BLOCK(?:_SIZE)?_[MNK](?![A-Za-z])")
_MASK = "__tuned__"


@dataclass(frozen=True)
class Param:
    key: str  # "<kernel>[#site].<keyword>", e.g. "softmax_kernel.BLOCK_SIZE", "k#2.num_warps"
    kind: str  # "block" | "num_warps" | "num_stages"
    value: int
    choices: tuple[int, ...]  # legal values, sorted; the current value is always among them


@dataclass(frozen=True)
class _Kernel:
    constexprs: frozenset[str]
    preset: frozenset[str]  # names that autotune/heuristics decorators mention: theirs, not ours
    autotuned: bool
    uses_dot: bool


@dataclass(frozen=True)
class _Analysis:
    module: cst.Module
    params: tuple[Param, ...]
    nodes: dict[str, tuple[cst.Integer, ...]]  # key -> the literal(s) holding its value
    dot_groups: tuple[tuple[str, ...], ...]  # per tl.dot launch: keys of its BLOCK* tiles
    distinct: tuple[tuple[str, tuple[str | int, ...]], ...]  # key -> values (or keys) it must differ from


def _dotted(expr: cst.BaseExpression) -> str:
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        return f"{_dotted(expr.value)}.{expr.attr.value}"
    return ""


def _pow2(v: int) -> bool:
    return v > 0 and v & (v - 1) == 0


def _params_of(fn: cst.FunctionDef) -> list[cst.Param]:
    ps = fn.params
    stars = [s for s in (ps.star_arg, ps.star_kwarg) if isinstance(s, cst.Param)]
    return [*ps.posonly_params, *ps.params, *ps.kwonly_params, *stars]


def _kernels(module: cst.Module) -> dict[str, _Kernel]:
    found: dict[str, tuple] = {}
    for fn in (s for s in module.body if isinstance(s, cst.FunctionDef)):
        jit, autotuned, preset = False, False, set()
        for dec in fn.decorators:
            name = _dotted(dec.decorator.func if isinstance(dec.decorator, cst.Call) else dec.decorator)
            jit |= name in ("jit", "triton.jit")
            if name in ("autotune", "triton.autotune", "heuristics", "triton.heuristics"):
                autotuned |= name.endswith("autotune")
                preset |= {cast(cst.SimpleString, s).evaluated_value for s in m.findall(dec, m.SimpleString())}
        if not jit:
            continue
        constexprs = frozenset(
            p.name.value
            for p in _params_of(fn)
            if p.annotation is not None and _dotted(p.annotation.annotation).endswith("constexpr")
        )
        calls = [cast(cst.Call, c).func for c in m.findall(fn.body, m.Call())]
        dot = any(_dotted(f).rsplit(".", 1)[-1] == "dot" for f in calls)
        callees = {f.value for f in calls if isinstance(f, cst.Name)}
        found[fn.name.value] = (constexprs, frozenset(preset), autotuned, dot, callees)
    # tl.dot reached through same-file jit helpers counts too
    dot = {name for name, f in found.items() if f[3]}
    while grown := {n for n, f in found.items() if n not in dot and f[4] & dot}:
        dot |= grown
    return {n: _Kernel(f[0], f[1], f[2], n in dot) for n, f in found.items()}


class _Launches(cst.CSTVisitor):
    """Launch sites `K[grid](...)` in source order, each with its innermost enclosing function."""

    def __init__(self, module: cst.Module, kernels: dict[str, _Kernel]) -> None:
        self.kernels = kernels
        self.scopes: list[cst.Module | cst.FunctionDef] = [module]
        self.sites: list[tuple[str, cst.Call, cst.Module | cst.FunctionDef]] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.scopes.append(node)
        return node.name.value not in self.kernels  # kernels launch nothing; skipping them saves time

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self.scopes.pop()

    def visit_Call(self, node: cst.Call) -> None:
        f = node.func
        if isinstance(f, cst.Subscript) and isinstance(f.value, cst.Name) and f.value.value in self.kernels:
            self.sites.append((f.value.value, node, self.scopes[-1]))


class _Bindings(cst.CSTVisitor):
    """Every binding of each name in one scope: the int literal bound, or None for anything else."""

    def __init__(self) -> None:
        self.found: dict[str, list[cst.Integer | None]] = defaultdict(list)

    def bind(self, target: cst.CSTNode, value: cst.CSTNode | None) -> None:
        if isinstance(target, cst.Name):
            self.found[target.value].append(value if isinstance(value, cst.Integer) else None)
        elif isinstance(target, (cst.Tuple, cst.List)):  # `BLOCK_M, BLOCK_N = 64, 32`
            values = None
            if (
                isinstance(value, (cst.Tuple, cst.List))
                and len(value.elements) == len(target.elements)
                and not any(isinstance(e, cst.StarredElement) for e in (*value.elements, *target.elements))
            ):
                values = [e.value for e in value.elements]
            for i, element in enumerate(target.elements):
                self.bind(element.value, values[i] if values else None)

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):  # a nested scope: only its name binds here
            self.bind(node.name, None)
            return False
        if isinstance(node, cst.Assign):  # `a = b = 1024` binds two names to one literal: not tunable
            for t in node.targets:
                self.bind(t.target, node.value if len(node.targets) == 1 else None)
        elif isinstance(node, cst.AnnAssign):
            self.bind(node.target, node.value)
        elif isinstance(node, (cst.AugAssign, cst.For, cst.NamedExpr)):
            self.bind(node.target, None)
        elif isinstance(node, cst.AsName):  # with-as, except-as, import-as
            self.bind(node.name, None)
        elif isinstance(node, (cst.Global, cst.Nonlocal)):
            for item in node.names:
                self.bind(item.name, None)
        return not isinstance(node, cst.Lambda)


def _scope_bindings(scope: cst.Module | cst.FunctionDef) -> dict[str, list[cst.Integer | None]]:
    b = _Bindings()
    if isinstance(scope, cst.FunctionDef):
        for p in _params_of(scope):
            b.bind(p.name, None)
        scope.body.visit(b)
    else:
        for stmt in scope.body:
            stmt.visit(b)
    return b.found


def _choices(kind: str, name: str, value: int, uses_dot: bool) -> tuple[int, ...] | None:
    """Legal values around `value`, or None when the value itself is not one we tune."""
    if kind == "num_warps":
        return tuple(sorted({*NUM_WARPS, value})) if _pow2(value) else None
    if kind == "num_stages":
        return tuple(sorted({*NUM_STAGES, value})) if value >= 1 else None
    if not _pow2(value):  # tl.arange needs powers of two
        return None
    cap = DOT_CAP if uses_dot or _DOT_NAME.search(name) else BLOCK_CAP
    lo = min(value, max(BLOCK_FLOOR, value // 16))
    hi = max(value, min(cap, value * 16))
    return tuple(1 << i for i in range(lo.bit_length() - 1, hi.bit_length()))


def _int(node: cst.Integer) -> int:
    return int(node.evaluated_value)


@functools.lru_cache(maxsize=64)
def _analyze(code: str) -> _Analysis:
    try:
        module = cst.parse_module(code)
    except cst.ParserSyntaxError as e:
        raise ValueError(f"the candidate is not parseable Python: {e}") from e
    kernels = _kernels(module)
    launches = _Launches(module, kernels)
    module.visit(launches)
    params: list[Param] = []
    nodes: dict[str, tuple[cst.Integer, ...]] = {}
    owner: dict[int, str] = {}  # id(literal) -> key: one literal shared by two keywords is one param
    groups: list[tuple[str, ...]] = []
    distinct: list[tuple[str, tuple[str | int, ...]]] = []
    site_count: dict[str, int] = defaultdict(int)
    bindings_of: dict[int, dict] = {}
    for kname, call, scope in launches.sites:
        kernel = kernels[kname]
        site_count[kname] += 1
        label = kname if site_count[kname] == 1 else f"{kname}#{site_count[kname]}"
        bindings = bindings_of.setdefault(id(scope), _scope_bindings(scope))
        grid = [
            cast(cst.Integer, n)
            for element in cast(cst.Subscript, call.func).slice
            for n in m.findall(element, m.Integer())
        ]
        literals = [
            a.value
            for a in call.args
            if a.keyword is not None and isinstance(a.value, cst.Integer) and a.keyword.value in kernel.constexprs
        ]
        tiles, literal_keys = [], []
        for arg in call.args:
            kw = arg.keyword.value if arg.keyword is not None else None
            if kw in ("num_warps", "num_stages"):
                if kernel.autotuned or kw in kernel.preset:
                    continue
                kind = kw
            elif kw in kernel.constexprs and kw not in kernel.preset:
                kind = "block"
            else:
                continue
            node, twins = arg.value, ()
            if isinstance(node, cst.Name):
                bound = bindings.get(node.value, [])
                node = bound[0] if len(bound) == 1 else None
            elif isinstance(node, cst.Integer) and kind == "block":
                # `K[(cdiv(n, 4096),)](..., BLOCK=4096)` writes one quantity twice: edit both,
                # unless another keyword has that value too (which one the grid means is unknowable)
                twins = tuple(g for g in grid if _int(g) == _int(node))
                if twins and sum(_int(n) == _int(node) for n in literals) > 1:
                    continue
            if not isinstance(node, cst.Integer):
                continue
            if id(node) not in owner:
                choices = _choices(kind, kw, _int(node), kernel.uses_dot)
                if choices is None:
                    continue
                key = f"{label}.{kw}"
                nodes[key] = (node, *twins)
                owner.update({id(n): key for n in nodes[key]})
                params.append(Param(key, kind, _int(node), choices))
                if node is arg.value and kind == "block":
                    literal_keys.append(key)
            if kind == "block" and kernel.uses_dot and "BLOCK" in kw:
                tiles.append(owner[id(node)])
        if len(tiles) >= 2:
            groups.append(tuple(tiles))
        # keep which grid literals pair with which keyword the same in every tuned child
        paired = [k for k in literal_keys if len(nodes[k]) > 1]
        loose = [_int(g) for g in grid if id(g) not in owner]
        for key in literal_keys:
            others = [*loose, *(k for k in paired if k != key)]
            if key in paired:
                others += [owner.get(id(n), _int(n)) for n in literals if owner.get(id(n)) != key]
            if others:
                distinct.append((key, tuple(others)))
    return _Analysis(module, tuple(params), nodes, tuple(groups), tuple(distinct))


class _Replace(cst.CSTTransformer):
    def __init__(self, new: dict[int, cst.BaseExpression]) -> None:
        self.new = new

    def leave_Integer(self, original_node: cst.Integer, updated_node: cst.Integer) -> cst.BaseExpression:
        return self.new.get(id(original_node), updated_node)


def find_params(code: str) -> list[Param]:
    """The tunable launch parameters of a candidate, in source order."""
    return list(_analyze(code).params)


def config_of(code: str) -> dict[str, int]:
    return {p.key: p.value for p in _analyze(code).params}


def skeleton_hash(code: str) -> str:
    """Hash of the code with every tunable literal masked: programs differing only in tuned values share it."""
    an = _analyze(code)
    masked = an.module.visit(_Replace({id(n): cst.Name(_MASK) for ns in an.nodes.values() for n in ns})).code
    return program_hash(masked)


def apply_config(code: str, config: dict[str, int]) -> str:
    """The code with the given parameters' literals rewritten; every other byte unchanged."""
    an = _analyze(code)
    unknown = sorted(set(config) - set(an.nodes))
    if unknown:
        raise ValueError(f"unknown tuning keys {unknown}; this code has {sorted(an.nodes)}")
    new: dict[int, cst.BaseExpression] = {}
    for key, value in config.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{key} must be a positive int, got {value!r}")
        for node in an.nodes[key]:
            if int(node.evaluated_value) != value:  # unchanged literals keep their spelling (0x400 stays)
                new[id(node)] = node.with_changes(value=str(value))
    return an.module.visit(_Replace(new)).code if new else code


# ----- proposals --------------------------------------------------------------------------------

Config = dict[str, int]


def _legal(config: Config, an: _Analysis) -> bool:
    """Within the tl.dot shared-memory bound, and no literal keyword taking a value that would
    change which grid literals pair with it."""
    return all(
        sum(config[a] * config[b] for a, b in itertools.combinations(g, 2)) <= DOT_AREA_BOUND for g in an.dot_groups
    ) and all(config[k] not in {config[o] if isinstance(o, str) else o for o in others} for k, others in an.distinct)


def _step(config: Config | None, p: Param, d: int) -> Config | None:
    """`config` with `p` moved `d` places along its choices; None off either end."""
    if config is None or config[p.key] not in p.choices:
        return None
    i = p.choices.index(config[p.key]) + d
    return {**config, p.key: p.choices[i]} if 0 <= i < len(p.choices) else None


def propose(
    code: str, measured: dict[frozenset, float], rng: random.Random, pending: frozenset | set = frozenset()
) -> tuple[str, Config] | None:
    """A config never measured nor `pending` (being evaluated) nor the current one, nearest first,
    following improvements (pending configs have no score yet, so they steer nothing).

    Stages, each ranked, rng breaking ties: (1) continue a direction that improved: if
    neighbour A -> current gained, step again the same way; if neighbour N beat current, step
    past N (bigger gains first); (2) an unmeasured neighbour, parameters that the measured
    configs varied least first; (3) two steps (two parameters, or one twice), best summed
    measured gains first; (4) any unmeasured config. None when nothing is left.
    """
    an = _analyze(code)
    if not an.params:
        return None
    current = {p.key: p.value for p in an.params}
    tried = set(measured) | set(pending) | {frozenset(current.items())}

    def score(cfg: Config | None) -> float | None:
        return None if cfg is None else measured.get(frozenset(cfg.items()))

    base = score(current)
    moves = [(p, d) for p in an.params for d in (-1, 1)]
    gain = {}  # (key, d) -> measured score change from current to that neighbour
    for p, d in moves:
        s = score(_step(current, p, d))
        gain[p.key, d] = 0.0 if s is None or base is None else s - base
    varied = defaultdict(int)
    for cfg in map(dict, measured):
        for p in an.params:
            varied[p.key] += p.key in cfg and cfg[p.key] != current[p.key]
    continuing = [
        (-abs(gain[p.key, d]), _step(current, p, -d) if gain[p.key, d] < 0 else _step(_step(current, p, d), p, d))
        for p, d in moves
        if gain[p.key, d]
    ]
    neighbours = [(varied[p.key], _step(current, p, d)) for p, d in moves]
    two_steps = [
        (-(gain[p.key, dp] + gain[q.key, dq]), _step(_step(current, p, dp), q, dq))
        for (p, dp), (q, dq) in itertools.combinations_with_replacement(moves, 2)
        if p is not q or dp == dq
    ]  # not there and back again
    for stage in (continuing, neighbours, two_steps):
        ranked = [
            (rank, rng.random(), i, cfg)
            for i, (rank, cfg) in enumerate(stage)
            if cfg is not None and frozenset(cfg.items()) not in tried and _legal(cfg, an)
        ]
        if ranked:
            pick = min(ranked, key=lambda r: r[:3])[3]
            return apply_config(code, pick), pick
    pick = _random(an, tried, rng)
    return None if pick is None else (apply_config(code, pick), pick)


def _random(an: _Analysis, tried: set[frozenset], rng: random.Random) -> Config | None:
    """Any unmeasured legal config; listed exhaustively when the space is small enough."""
    keys = [p.key for p in an.params]
    size = 1
    for p in an.params:
        size *= len(p.choices)
    if size <= ENUMERATE_LIMIT:
        options = [
            c
            for values in itertools.product(*(p.choices for p in an.params))
            if frozenset((c := dict(zip(keys, values))).items()) not in tried and _legal(c, an)
        ]
        return rng.choice(options) if options else None
    for _ in range(SAMPLE_TRIES):  # a space this large is practically never exhausted
        c = {p.key: rng.choice(p.choices) for p in an.params}
        if frozenset(c.items()) not in tried and _legal(c, an):
            return c
    return None
