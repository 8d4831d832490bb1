"""An LLM-free mutation operator: retune the launch parameters of a Triton candidate.

Edits go through libcst, so everything else in the file stays byte-identical and a tuned child
differs from its parent at its launches alone. What is tuned, at a launch `K[grid](...)` of a
`@triton.jit` kernel of the same file:
  * "block": a block-like `tl.constexpr` keyword (BLOCK*, TILE*, SPLIT*, CHUNK*, BM/BN/BK, GROUP_M: how the
    work is cut; another, `MODE=1`, is the kernel's meaning, tuned only where the config's [tuner]
    constexprs names it) whose value is a power-of-two int, written at the launch
    (`BLOCK=1024`) or bound once in the launching function (`BLOCK = 1024`; then the assignment
    is edited so the grid's `triton.cdiv(n, BLOCK)` stays consistent; `B_M, B_N = 64, 32` too).
    An inline grid literal equal to a literal keyword (`K[(cdiv(n, 4096),)](..., BLOCK=4096)`)
    is the same quantity written twice and is edited with it;
  * "scale": a block computed at run time (`triton.next_power_of_2(n)`, `min(...)` of it), scaled
    by a power of two; never below the computed value where the kernel needs the whole row
    (tuner_launch.py), and the power-of-two literals of its `min(...)` caps as blocks;
  * "num_warps" / "num_stages" (and on Hopper "num_ctas" for tl.dot kernels, "maxnreg"): literals
    at the launch, or added where the launch leaves them out (starting from Triton's defaults; an
    option at its default is never written, so the child stays in its parent's family). Not under
    Triton's interpreter (`interpreted`, a search on the CPU), which ignores every launch option: there
    a child differing only in them would be its parent again (kernelsmith.identity);
  * `@triton.autotune` kernels: the literals of every `triton.Config`, so the autotuner picks
    among tuned configs.
Finding these values is tuner_analysis.py's (over the kernels, launches and bindings tuner_sites.py
reads); which configuration to measure next, within the register and shared-memory bounds of tl.dot
tiles, is tuner_search.py's; the rewriting itself tuner_edit.py's.
Kernel parameter defaults and what `@triton.heuristics` sets are not the caller's to tune.
"""

from __future__ import annotations

from collections import defaultdict

import libcst as cst

from kernelsmith.evolve import tuner_edit
from kernelsmith.evolve.tuner_analysis import Analysis, Param, analyze
from kernelsmith.identity import program_hash

__all__ = ["Analysis", "Param", "analyze", "apply_config", "config_of", "find_params", "skeleton_hash"]


def find_params(
    code: str, hopper: bool = False, interpreted: bool = False, named: frozenset[str] = frozenset()
) -> list[Param]:
    """The tunable launch parameters of a candidate, in source order (launch options it leaves out
    included, at the values Triton gives them; none under the interpreter, which ignores them).
    `named`: constexprs the user names to be tuned besides the block-like ones."""
    return list(analyze(code, hopper, interpreted, named).params)


def config_of(
    code: str, hopper: bool = False, interpreted: bool = False, named: frozenset[str] = frozenset()
) -> dict[str, int]:
    return {p.key: p.value for p in analyze(code, hopper, interpreted, named).params}


def skeleton_hash(
    code: str, hopper: bool = False, interpreted: bool = False, named: frozenset[str] = frozenset()
) -> str:
    """Hash of the code with every tunable literal masked and the launch options the tuner sets
    left out: programs differing only in tuned values (an option written or not) share it."""
    an = analyze(code, hopper, interpreted, named)
    ints: dict[int, cst.BaseExpression] = {id(n): cst.Name(tuner_edit.MASK) for ns in an.nodes.values() for n in ns}
    drop = {id(arg) for arg in an.option_args.values()}
    masked = an.module.visit(tuner_edit.Replace(ints, {id(n): None for n in an.scaled.values()}, drop=drop)).code
    return program_hash(masked)


def apply_config(
    code: str,
    config: dict[str, int],
    hopper: bool = False,
    interpreted: bool = False,
    named: frozenset[str] = frozenset(),
) -> str:
    """The code with the given parameters rewritten (literals, scaled blocks, added launch
    options); every other byte unchanged. An absent option set to its default stays absent."""
    an = analyze(code, hopper, interpreted, named)
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
