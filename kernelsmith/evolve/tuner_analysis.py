"""What the tuner may tune in a candidate, and where each value is written (tuner.py describes the
kinds; tuner_sites.py reads the kernels, launches and bindings this works from).

`analyze` walks the launch sites in source order, then the configs of `@triton.autotune` kernels,
and for each tunable value records a Param, the literal(s) or expression that hold it, and the
constraints between values (tl.dot tiles, grid literals paired with keywords).
"""

from __future__ import annotations

import functools
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import cast

import libcst as cst
import libcst.matchers as m

from kernelsmith.evolve import tuner_launch as launch
from kernelsmith.evolve.tuner_sites import Kernel, LaunchSites, find_kernels, scope_bindings

NUM_WARPS = (1, 2, 4, 8, 16)
NUM_STAGES = (1, 2, 3, 4, 5)
BLOCK_FLOOR, BLOCK_CAP = 16, 16384
DOT_CAP = 256  # tl.dot tiles: larger ones exceed registers/shared memory on current GPUs
_DOT_NAME = re.compile(r"BLOCK(?:_SIZE)?_[MNK](?![A-Za-z])")
# The tl.constexpr names that are blocks (their value how work is cut, not what it computes): BLOCK*, XBLOCK,
# R0_BLOCK, TILE_*, SPLIT_K, CHUNK, BM/BN/BK, GROUP_M. Any other constexpr is the kernel's meaning (`MODE=1` was
# tried as `MODE=2`, issue 55) and is tuned only where the user names it ([tuner] constexprs).
BLOCK_LIKE = re.compile(r"BLOCK|TILE|SPLIT|CHUNK|^B_?[MNKD]$|^GROUP(_SIZE)?_[MNK]$", re.IGNORECASE)


def block_like(name: str, named: frozenset[str] = frozenset()) -> bool:
    """A constexpr the tuner may tune: block-like by its name, or named by the user."""
    return name in named or BLOCK_LIKE.search(name) is not None


@dataclass(frozen=True)
class Param:
    key: str  # "<kernel>[#site].<keyword>", e.g. "softmax_kernel.BLOCK_SIZE", "k#2.num_warps"
    kind: str  # "block" | "scale" | "num_warps" | "num_stages" | "num_ctas" | "maxnreg"
    value: int
    choices: tuple[int, ...]  # legal values, sorted; the current value is always among them
    added: bool = False  # a launch option the code leaves out (its value: Triton's default)


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


@dataclass
class _Site:
    """One launch `K[grid](...)` while its keywords are read: what it is, and what it has found so far."""

    kernel: Kernel
    label: str  # the kernel's name, with "#2", "#3"... from its second launch on
    call: cst.Call
    bindings: dict[str, list[cst.BaseExpression | None]]
    grid: list[cst.Integer]  # the int literals of its grid
    literals: list[cst.Integer]  # the int literals written at its constexpr keywords
    tiles: list[tuple[str, str]] = field(default_factory=list)  # tl.dot BLOCK* keywords -> keys
    literal_keys: list[str] = field(default_factory=list)  # keys of blocks written as literals at the launch
    stages: str | None = None
    warps: str | None = None


class _Analyzer:
    """The state `analyze` builds up: launch by launch in source order, then config by config."""

    def __init__(
        self, kernels: dict[str, Kernel], hopper: bool, interpreted: bool = False, named: frozenset[str] = frozenset()
    ) -> None:
        self.kernels, self.hopper = kernels, hopper
        self.interpreted = interpreted  # Triton's interpreter: launch options change nothing
        self.named = named  # constexprs the user names to be tuned besides the block-like ones
        self.params: list[Param] = []
        self.nodes: dict[str, tuple[cst.Integer, ...]] = {}
        self.owner: dict[int, str] = {}  # id(literal) -> key: one literal shared by two keywords is one param
        self.groups: list[tuple[str, ...]] = []
        self.tile_groups: list[tuple[str | None, str | None, str, str, str]] = []
        self.distinct: list[tuple[str, tuple[str | int, ...]]] = []
        self.scaled: dict[str, cst.BaseExpression] = {}
        self.inserts: dict[str, tuple[cst.Call, str, int]] = {}
        self.option_args: dict[str, cst.Arg] = {}
        self.site_count: dict[str, int] = defaultdict(int)
        self.bindings_of: dict[int, dict] = {}

    def add(self, key: str, kind: str, node: cst.Integer, choices, twins=()) -> None:
        self.nodes[key] = (node, *twins)
        self.owner.update({id(n): key for n in self.nodes[key]})
        self.params.append(Param(key, kind, _int(node), choices))

    def group_tiles(self, kernel: Kernel, stages: str | None, warps: str | None, tiles: list[tuple[str, str]]) -> None:
        """The tl.dot tiles of one launch or autotune config: named (M, N, K) or not (pairwise area)."""
        if kernel.uses_dot and (g := _tile_group(stages, warps, tiles)):
            self.tile_groups.append(g)
        elif len(tiles) >= 2:
            self.groups.append(tuple(k for _, k in tiles))

    def launch(self, kname: str, call: cst.Call, scope: cst.Module | cst.FunctionDef) -> None:
        kernel = self.kernels[kname]
        self.site_count[kname] += 1
        label = kname if self.site_count[kname] == 1 else f"{kname}#{self.site_count[kname]}"
        bindings = self.bindings_of.setdefault(id(scope), scope_bindings(scope))
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
        site = _Site(kernel, label, call, bindings, grid, literals)
        for arg in call.args:
            self.keyword(site, arg)
        self.absent_options(site)
        self.group_tiles(kernel, site.stages, site.warps, site.tiles)
        self.pair_grid_literals(site)

    def keyword(self, site: _Site, arg: cst.Arg) -> None:
        """One keyword of a launch: a launch option or a constexpr block, written or bound to a name."""
        kernel = site.kernel
        if arg.keyword is None:
            return
        kw = arg.keyword.value
        if kw in ("num_warps", "num_stages", *launch.HOPPER_ONLY):
            if kernel.autotuned or kw in kernel.preset or self.interpreted:
                return
            kind = kw
        elif kw in kernel.constexprs and kw not in kernel.preset and block_like(kw, self.named):
            kind = "block"
        else:
            return
        node, twins = arg.value, ()
        via_name = isinstance(node, cst.Name)
        if isinstance(node, cst.Name):
            bound = site.bindings.get(node.value, [])
            node = bound[0] if len(bound) == 1 else None
        elif isinstance(node, cst.Integer) and kind == "block":
            # `K[(cdiv(n, 4096),)](..., BLOCK=4096)` writes one quantity twice: edit both,
            # unless another keyword has that value too (which one the grid means is unknowable)
            twins = tuple(g for g in site.grid if _int(g) == _int(node))
            if twins and sum(_int(n) == _int(node) for n in site.literals) > 1:
                return
        if kind == "block" and node is not None and not isinstance(node, cst.Integer):
            self.scaled_block(site, arg, kw, node, via_name)
            return
        if not isinstance(node, cst.Integer):
            return
        if id(node) not in self.owner:
            if kind in launch.HOPPER_ONLY:
                choices = _option_choices(kind, _int(node)) if self.hopper else None
            else:
                choices = _choices(kind, kw, _int(node), kernel.uses_dot)
            if choices is None:
                return
            key = f"{site.label}.{kw}"
            self.add(key, kind, node, choices, twins)
            if kind != "block":
                self.option_args[key] = arg
            if node is arg.value and kind == "block":
                site.literal_keys.append(key)
        if kind == "num_stages":
            site.stages = self.owner[id(node)]
        if kind == "num_warps":
            site.warps = self.owner[id(node)]
        if kind == "block" and kernel.uses_dot and "BLOCK" in kw:
            site.tiles.append((kw, self.owner[id(node)]))

    def scaled_block(self, site: _Site, arg: cst.Arg, kw: str, node: cst.BaseExpression, via_name: bool) -> None:
        """A block computed at run time: its scale, and the power-of-two caps of its `min(...)`."""
        split = launch.split_scale(node)
        if split is None or id(node) in self.owner:
            return
        # blocks the kernel loops over (or the grid divides by) may shrink; a whole row may not
        name_in_grid = via_name and cast(cst.Name, arg.value).value in launch.grid_names(site.call)
        looping = kw in site.kernel.loops or name_in_grid
        key = f"{site.label}.{kw}.scale"
        self.scaled[key] = node
        self.owner[id(node)] = key
        base = launch.SCALES_LOOPING if looping else launch.SCALES_WHOLE_ROW
        self.params.append(Param(key, "scale", split[1], tuple(sorted({*base, split[1]}))))
        caps = [n for n in m.findall(split[0], m.Integer()) if launch.pow2_int(cast(cst.Integer, n))]
        for j, cap in enumerate(cast(list[cst.Integer], caps)):
            choices = _choices("block", kw, _int(cap), site.kernel.uses_dot)
            if choices is not None and not looping:
                choices = tuple(c for c in choices if c >= _int(cap))
            if choices is not None and id(cap) not in self.owner:
                self.add(
                    f"{site.label}.{kw}.cap{j}" if len(caps) > 1 else f"{site.label}.{kw}.cap", "block", cap, choices
                )

    def absent_options(self, site: _Site) -> None:
        """Launch options the launch leaves out, at the values Triton gives them."""
        kernel = site.kernel
        if self.interpreted:
            return
        absent = launch.absent_options(site.call, kernel.autotuned, kernel.preset, kernel.uses_dot, self.hopper)
        for opt, value in absent.items():
            key = f"{site.label}.{opt}"
            choices = _option_choices(opt, value)
            if choices is None:
                continue
            self.inserts[key] = (site.call, opt, value)
            self.params.append(Param(key, opt, value, choices, added=True))
            site.stages = key if opt == "num_stages" else site.stages
            site.warps = key if opt == "num_warps" else site.warps

    def pair_grid_literals(self, site: _Site) -> None:
        """Keep which grid literals pair with which keyword the same in every tuned child."""
        paired = [k for k in site.literal_keys if len(self.nodes[k]) > 1]
        loose = [_int(g) for g in site.grid if id(g) not in self.owner]
        for key in site.literal_keys:
            others = [*loose, *(k for k in paired if k != key)]
            if key in paired:
                others += [self.owner.get(id(n), _int(n)) for n in site.literals if self.owner.get(id(n)) != key]
            if others:
                self.distinct.append((key, tuple(others)))

    def autotune_configs(self) -> None:
        """@triton.autotune: the literals of each config (the autotuner then picks among tuned configs)."""
        for kname, kernel in self.kernels.items():
            for i, entries in enumerate(kernel.configs):
                tiles, stages, warps = [], None, None
                for name, lit in entries:
                    kind = name if name in ("num_warps", "num_stages") else "block"
                    if (kind != "block" and self.interpreted) or (kind == "block" and not block_like(name, self.named)):
                        continue
                    choices = _choices(kind, name, _int(lit), kernel.uses_dot)
                    if choices is None or id(lit) in self.owner:
                        continue
                    key = f"{kname}.config{i}.{name}"
                    self.add(key, kind, lit, choices)
                    stages = key if kind == "num_stages" else stages
                    warps = key if kind == "num_warps" else warps
                    if kind == "block" and kernel.uses_dot and "BLOCK" in name:
                        tiles.append((name, key))
                self.group_tiles(kernel, stages, warps, tiles)


@functools.lru_cache(maxsize=64)
def analyze(
    code: str, hopper: bool = False, interpreted: bool = False, named: frozenset[str] = frozenset()
) -> Analysis:
    """What may be tuned in `code`: on Hopper its options too; under Triton's interpreter
    (`interpreted`) no launch option, as it ignores them all; constexprs that are not block-like only where
    `named`."""
    try:
        module = cst.parse_module(code)
    except cst.ParserSyntaxError as e:
        raise ValueError(f"the candidate is not parseable Python: {e}") from e
    kernels = find_kernels(module)
    sites = LaunchSites(module, kernels)
    module.visit(sites)
    an = _Analyzer(kernels, hopper, interpreted, named)
    for kname, call, scope in sites.sites:
        an.launch(kname, call, scope)
    launch_tiles = len(an.tile_groups)
    an.autotune_configs()
    return Analysis(
        module,
        tuple(an.params),
        an.nodes,
        tuple(an.groups),
        tuple(an.distinct),
        an.scaled,
        an.inserts,
        an.option_args,
        tuple(an.tile_groups),
        launch_tiles,
    )
