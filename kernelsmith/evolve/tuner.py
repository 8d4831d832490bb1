"""An LLM-free mutation operator: retune the launch parameters of a Triton candidate.

Edits go through libcst, so everything else in the file stays byte-identical and a tuned child
differs from its parent at its launches alone. What is tuned, at a launch `K[grid](...)` of a
`@triton.jit` kernel of the same file:
  * "block": a `tl.constexpr` keyword whose value is a power-of-two int, written at the launch
    (`BLOCK=1024`) or bound once in the launching function (`BLOCK = 1024`; then the assignment
    is edited so the grid's `triton.cdiv(n, BLOCK)` stays consistent; `B_M, B_N = 64, 32` too).
    An inline grid literal equal to a literal keyword (`K[(cdiv(n, 4096),)](..., BLOCK=4096)`)
    is the same quantity written twice and is edited with it;
  * "scale": a block computed at run time (`triton.next_power_of_2(n)`, `min(...)` of it), scaled
    by a power of two; never below the computed value where the kernel needs the whole row
    (tuner_launch.py), and the power-of-two literals of its `min(...)` caps as blocks;
  * "num_warps" / "num_stages" (and on Hopper "num_ctas" for tl.dot kernels, "maxnreg"): literals
    at the launch, or added where the launch leaves them out (starting from Triton's defaults; an
    option at its default is never written, so the child stays in its parent's family);
  * `@triton.autotune` kernels: the literals of every `triton.Config`, so the autotuner picks
    among tuned configs.
Which configuration to measure next, within the register and shared-memory bounds of tl.dot
tiles, is tuner_search.py's; the rewriting itself tuner_edit.py's.
Kernel parameter defaults and what `@triton.heuristics` sets are not the caller's to tune.
"""

from __future__ import annotations

import functools
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import cast

import libcst as cst
import libcst.matchers as m

from kernelsmith.evolve import tuner_edit
from kernelsmith.evolve import tuner_launch as launch
from kernelsmith.identity import program_hash

NUM_WARPS = (1, 2, 4, 8, 16)
NUM_STAGES = (1, 2, 3, 4, 5)
BLOCK_FLOOR, BLOCK_CAP = 16, 16384
DOT_CAP = 256  # tl.dot tiles: larger ones exceed registers/shared memory on current GPUs
_DOT_NAME = re.compile(r"BLOCK(?:_SIZE)?_[MNK](?![A-Za-z])")


@dataclass(frozen=True)
class Param:
    key: str  # "<kernel>[#site].<keyword>", e.g. "softmax_kernel.BLOCK_SIZE", "k#2.num_warps"
    kind: str  # "block" | "scale" | "num_warps" | "num_stages" | "num_ctas" | "maxnreg"
    value: int
    choices: tuple[int, ...]  # legal values, sorted; the current value is always among them
    added: bool = False  # a launch option the code leaves out (its value: Triton's default)


@dataclass(frozen=True)
class _Kernel:
    constexprs: frozenset[str]
    preset: frozenset[str]  # names that autotune/heuristics decorators mention: theirs, not ours
    autotuned: bool
    uses_dot: bool
    loops: frozenset[str] = frozenset()  # names inside a range(...) in its body: blocks it loops over
    configs: tuple = ()  # @triton.autotune: per Config, ((name, literal), ...)


@dataclass(frozen=True)
class Analysis:
    module: cst.Module
    params: tuple[Param, ...]
    nodes: dict[str, tuple[cst.Integer, ...]]  # key -> the literal(s) holding its value
    dot_groups: tuple[tuple[str, ...], ...]  # per tl.dot launch: keys of its BLOCK* tiles
    distinct: tuple[tuple[str, tuple[str | int, ...]], ...]  # key -> values (or keys) it must differ from
    # computed blocks: key -> the expression node (E, E * k or max(E // k, 16)) that is rescaled
    scaled: dict[str, cst.BaseExpression] = field(default_factory=dict)
    # options a launch leaves out: key -> (its call, the keyword, the value it has now)
    inserts: dict[str, tuple[cst.Call, str, int]] = field(default_factory=dict)
    option_args: dict[str, cst.Arg] = field(default_factory=dict)  # options written at the launch
    # per tl.dot launch with named tiles: (stages key or None, warps key or None, BLOCK_M, BLOCK_N, BLOCK_K keys)
    tile_groups: tuple[tuple[str | None, str | None, str, str, str], ...] = ()
    launch_tiles: int = 0  # the first this many of tile_groups are launches' (the rest autotune configs')


def _params_of(fn: cst.FunctionDef) -> list[cst.Param]:
    ps = fn.params
    stars = [s for s in (ps.star_arg, ps.star_kwarg) if isinstance(s, cst.Param)]
    return [*ps.posonly_params, *ps.params, *ps.kwonly_params, *stars]


def _kernels(module: cst.Module) -> dict[str, _Kernel]:
    found: dict[str, tuple] = {}
    extra: dict[str, tuple] = {}
    for fn in (s for s in module.body if isinstance(s, cst.FunctionDef)):
        jit, autotuned, preset, configs = False, False, set(), []
        for dec in fn.decorators:
            name = launch.dotted(dec.decorator.func if isinstance(dec.decorator, cst.Call) else dec.decorator)
            jit |= name in ("jit", "triton.jit")
            if name in ("autotune", "triton.autotune", "heuristics", "triton.heuristics"):
                autotuned |= name.endswith("autotune")
                preset |= {cast(cst.SimpleString, s).evaluated_value for s in m.findall(dec, m.SimpleString())}
                if name.endswith("autotune"):
                    configs += launch.autotune_configs(dec, module)
        if not jit:
            continue
        constexprs = frozenset(
            p.name.value
            for p in _params_of(fn)
            if p.annotation is not None and launch.dotted(p.annotation.annotation).endswith("constexpr")
        )
        calls = [cast(cst.Call, c).func for c in m.findall(fn.body, m.Call())]
        dot = any(launch.dotted(f).rsplit(".", 1)[-1] == "dot" for f in calls)
        callees = {f.value for f in calls if isinstance(f, cst.Name)}
        found[fn.name.value] = (constexprs, frozenset(preset), autotuned, dot, callees)
        extra[fn.name.value] = (launch.looped_names(fn), tuple(tuple(c) for c in configs))
    # tl.dot reached through same-file jit helpers counts too
    dot = {name for name, f in found.items() if f[3]}
    while grown := {n for n, f in found.items() if n not in dot and f[4] & dot}:
        dot |= grown
    return {n: _Kernel(f[0], f[1], f[2], n in dot, *extra[n]) for n, f in found.items()}


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
        # an int literal, or a computed block (tuner_launch.split_scale), bound to the name
        self.found: dict[str, list[cst.BaseExpression | None]] = defaultdict(list)

    def bind(self, target: cst.CSTNode, value: cst.CSTNode | None) -> None:
        if isinstance(target, cst.Name):
            keep = isinstance(value, cst.Integer) or (
                isinstance(value, cst.BaseExpression) and launch.split_scale(value) is not None
            )
            self.found[target.value].append(cast(cst.BaseExpression, value) if keep else None)
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


def _scope_bindings(scope: cst.Module | cst.FunctionDef) -> dict[str, list[cst.BaseExpression | None]]:
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
        return tuple(sorted({*NUM_WARPS, value})) if launch.is_pow2(value) else None
    if kind == "num_stages":
        return tuple(sorted({*NUM_STAGES, value})) if value >= 1 else None
    if not launch.is_pow2(value):  # tl.arange needs powers of two
        return None
    cap = DOT_CAP if uses_dot or _DOT_NAME.search(name) else BLOCK_CAP
    lo = min(value, max(BLOCK_FLOOR, value // 16))
    hi = max(value, min(cap, value * 16))
    return tuple(1 << i for i in range(lo.bit_length() - 1, hi.bit_length()))


def _int(node: cst.Integer) -> int:
    return int(node.evaluated_value)


def _option_choices(kind: str, value: int) -> tuple[int, ...] | None:
    if kind == "num_ctas":
        return tuple(sorted({*launch.NUM_CTAS, value}))
    if kind == "maxnreg":  # NO_REG_CAP only where the launch has no cap (it is never written)
        return tuple(sorted({*launch.MAXNREG, value}))
    return _choices(kind, kind, value, False)


_TILE = re.compile(r"_([MNK])$")


def _tile_group(
    stages: str | None, warps: str | None, tiles: list[tuple[str, str]]
) -> tuple[str | None, str | None, str, str, str] | None:
    """(stages, warps, M, N, K keys) of a tl.dot launch whose tiles name their dimension (BLOCK_M ...)."""
    dims = {}
    for kw, key in tiles:
        hit = _TILE.search(kw)
        if hit:
            dims[hit.group(1)] = key
    if set(dims) != {"M", "N", "K"}:
        return None
    return (stages, warps, dims["M"], dims["N"], dims["K"])


@functools.lru_cache(maxsize=64)
def analyze(code: str, hopper: bool = False) -> Analysis:
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
    tile_groups: list[tuple[str | None, str | None, str, str, str]] = []
    distinct: list[tuple[str, tuple[str | int, ...]]] = []
    scaled: dict[str, cst.BaseExpression] = {}
    inserts: dict[str, tuple[cst.Call, str, int]] = {}
    option_args: dict[str, cst.Arg] = {}
    site_count: dict[str, int] = defaultdict(int)
    bindings_of: dict[int, dict] = {}

    def add(key: str, kind: str, node: cst.Integer, choices, twins=()) -> None:
        nodes[key] = (node, *twins)
        owner.update({id(n): key for n in nodes[key]})
        params.append(Param(key, kind, _int(node), choices))

    def group_tiles(kernel: _Kernel, stages: str | None, warps: str | None, tiles: list[tuple[str, str]]) -> None:
        """The tl.dot tiles of one launch or autotune config: named (M, N, K) or not (pairwise area)."""
        if kernel.uses_dot and (g := _tile_group(stages, warps, tiles)):
            tile_groups.append(g)
        elif len(tiles) >= 2:
            groups.append(tuple(k for _, k in tiles))

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
        tiles, literal_keys, stages, warps = [], [], None, None
        for arg in call.args:
            kw = arg.keyword.value if arg.keyword is not None else None
            if kw in ("num_warps", "num_stages", *launch.HOPPER_ONLY):
                if kernel.autotuned or kw in kernel.preset:
                    continue
                kind = kw
            elif kw in kernel.constexprs and kw not in kernel.preset:
                kind = "block"
            else:
                continue
            node, twins = arg.value, ()
            via_name = isinstance(node, cst.Name)
            if isinstance(node, cst.Name):
                bound = bindings.get(node.value, [])
                node = bound[0] if len(bound) == 1 else None
            elif isinstance(node, cst.Integer) and kind == "block":
                # `K[(cdiv(n, 4096),)](..., BLOCK=4096)` writes one quantity twice: edit both,
                # unless another keyword has that value too (which one the grid means is unknowable)
                twins = tuple(g for g in grid if _int(g) == _int(node))
                if twins and sum(_int(n) == _int(node) for n in literals) > 1:
                    continue
            if kind == "block" and node is not None and not isinstance(node, cst.Integer):
                split = launch.split_scale(node)
                if split is None or id(node) in owner:
                    continue
                # blocks the kernel loops over (or the grid divides by) may shrink; a whole row may not
                name_in_grid = via_name and cast(cst.Name, arg.value).value in launch.grid_names(call)
                looping = kw in kernel.loops or name_in_grid
                key = f"{label}.{kw}.scale"
                scaled[key] = node
                owner[id(node)] = key
                base = launch.SCALES_LOOPING if looping else launch.SCALES_WHOLE_ROW
                params.append(Param(key, "scale", split[1], tuple(sorted({*base, split[1]}))))
                caps = [n for n in m.findall(split[0], m.Integer()) if launch.pow2_int(cast(cst.Integer, n))]
                for j, cap in enumerate(cast(list[cst.Integer], caps)):
                    choices = _choices("block", kw, _int(cap), kernel.uses_dot)
                    if choices is not None and not looping:
                        choices = tuple(c for c in choices if c >= _int(cap))
                    if choices is not None and id(cap) not in owner:
                        add(f"{label}.{kw}.cap{j}" if len(caps) > 1 else f"{label}.{kw}.cap", "block", cap, choices)
                continue
            if not isinstance(node, cst.Integer):
                continue
            if id(node) not in owner:
                if kind in launch.HOPPER_ONLY:
                    choices = _option_choices(kind, _int(node)) if hopper else None
                else:
                    choices = _choices(kind, kw, _int(node), kernel.uses_dot)
                if choices is None:
                    continue
                key = f"{label}.{kw}"
                add(key, kind, node, choices, twins)
                if kind != "block":
                    option_args[key] = arg
                if node is arg.value and kind == "block":
                    literal_keys.append(key)
            if kind == "num_stages":
                stages = owner[id(node)]
            if kind == "num_warps":
                warps = owner[id(node)]
            if kind == "block" and kernel.uses_dot and "BLOCK" in kw:
                tiles.append((kw, owner[id(node)]))
        for opt, value in launch.absent_options(call, kernel.autotuned, kernel.preset, kernel.uses_dot, hopper).items():
            key = f"{label}.{opt}"
            choices = _option_choices(opt, value)
            if choices is None:
                continue
            inserts[key] = (call, opt, value)
            params.append(Param(key, opt, value, choices, added=True))
            stages = key if opt == "num_stages" else stages
            warps = key if opt == "num_warps" else warps
        group_tiles(kernel, stages, warps, tiles)
        # keep which grid literals pair with which keyword the same in every tuned child
        paired = [k for k in literal_keys if len(nodes[k]) > 1]
        loose = [_int(g) for g in grid if id(g) not in owner]
        for key in literal_keys:
            others = [*loose, *(k for k in paired if k != key)]
            if key in paired:
                others += [owner.get(id(n), _int(n)) for n in literals if owner.get(id(n)) != key]
            if others:
                distinct.append((key, tuple(others)))
    launch_tiles = len(tile_groups)
    # @triton.autotune: the literals of each config (the autotuner then picks among tuned configs)
    for kname, kernel in kernels.items():
        for i, entries in enumerate(kernel.configs):
            tiles, stages, warps = [], None, None
            for name, lit in entries:
                kind = name if name in ("num_warps", "num_stages") else "block"
                choices = _choices(kind, name, _int(lit), kernel.uses_dot)
                if choices is None or id(lit) in owner:
                    continue
                key = f"{kname}.config{i}.{name}"
                add(key, kind, lit, choices)
                stages = key if kind == "num_stages" else stages
                warps = key if kind == "num_warps" else warps
                if kind == "block" and kernel.uses_dot and "BLOCK" in name:
                    tiles.append((name, key))
            group_tiles(kernel, stages, warps, tiles)
    return Analysis(
        module,
        tuple(params),
        nodes,
        tuple(groups),
        tuple(distinct),
        scaled,
        inserts,
        option_args,
        tuple(tile_groups),
        launch_tiles,
    )


def find_params(code: str, hopper: bool = False) -> list[Param]:
    """The tunable launch parameters of a candidate, in source order (launch options it leaves out
    included, at the values Triton gives them)."""
    return list(analyze(code, hopper).params)


def config_of(code: str, hopper: bool = False) -> dict[str, int]:
    return {p.key: p.value for p in analyze(code, hopper).params}


def skeleton_hash(code: str, hopper: bool = False) -> str:
    """Hash of the code with every tunable literal masked and the launch options the tuner sets
    left out: programs differing only in tuned values (an option written or not) share it."""
    an = analyze(code, hopper)
    ints: dict[int, cst.BaseExpression] = {id(n): cst.Name(tuner_edit.MASK) for ns in an.nodes.values() for n in ns}
    drop = {id(arg) for arg in an.option_args.values()}
    masked = an.module.visit(tuner_edit.Replace(ints, {id(n): None for n in an.scaled.values()}, drop=drop)).code
    return program_hash(masked)


def apply_config(code: str, config: dict[str, int], hopper: bool = False) -> str:
    """The code with the given parameters rewritten (literals, scaled blocks, added launch
    options); every other byte unchanged. An absent option set to its default stays absent."""
    an = analyze(code, hopper)
    known = set(an.nodes) | set(an.scaled) | set(an.inserts)
    unknown = sorted(set(config) - known)
    if unknown:
        raise ValueError(f"unknown tuning keys {unknown}; this code has {sorted(known)}")
    ints: dict[int, cst.BaseExpression] = {}
    scaled: dict[int, int | None] = {}
    add: dict[int, list[tuple[str, int]]] = defaultdict(list)
    current = {p.key: p.value for p in an.params}
    for key, value in config.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{key} must be a positive int, got {value!r}")
        if key in an.scaled:
            if value != current[key]:
                scaled[id(an.scaled[key])] = value
        elif key in an.inserts:
            call, kw, default = an.inserts[key]
            if value != default:
                add[id(call)].append((kw, value))
        else:
            for node in an.nodes[key]:
                if int(node.evaluated_value) != value:  # unchanged literals keep their spelling (0x400 stays)
                    ints[id(node)] = node.with_changes(value=str(value))
    if not (ints or scaled or add):
        return code
    return an.module.visit(tuner_edit.Replace(ints, scaled, dict(add))).code
