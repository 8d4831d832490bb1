"""The tuner's proposals: which launch configuration of a candidate to measure next (tuner.py
finds and rewrites the parameters; tuning.py keeps what the search has measured).

A proposal is never measured, pending (being evaluated) or the current config, and stays within
the bounds of a `tl.dot` launch (registers, shared memory). Stages, each ranked, rng breaking ties:
(0) for a GEMM launch, the configs of Triton's matmul tutorial; (1) continue a direction that
improved; (2) an unmeasured neighbour; (3) two steps; (4) any unmeasured config.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
from collections import defaultdict

from kernelsmith.evolve import tuner_launch as launch
from kernelsmith.evolve.tuner import apply_config
from kernelsmith.evolve.tuner_analysis import Analysis, Param, analyze

# A tl.dot launch whose tiles name their dimensions (BLOCK_M, BLOCK_N, BLOCK_K):
# - registers: the fp32 accumulator BLOCK_M*BLOCK_N spread over num_warps*32 threads must fit
#   within a thread's 255 registers: BLOCK_M*BLOCK_N <= ACC_PER_WARP * num_warps (128x256 needs
#   4 warps, 256x256 needs 8); beyond that it can only spill;
# - shared memory: the pipelined A and B tiles, num_stages * (BLOCK_M*BLOCK_K + BLOCK_K*BLOCK_N)
#   2-byte elements, within ~200 KiB (an H100/H200 SM has 228 KiB; A100 164 KiB fails above that).
ACC_PER_WARP = 32 * 256
STAGED_TILE_BOUND = 100 * 1024
# Tiles that do not name their dimensions: BLOCK* products summed over pairs at one launch within
# what three 128-wide tiles take (a rough shared-memory and register bound of older versions).
DOT_AREA_BOUND = 3 * 128 * 128
ENUMERATE_LIMIT = 200_000  # beyond this many configs, random ones are sampled, not listed
SAMPLE_TRIES = 2_000

Config = dict[str, int]

# (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages): the CUDA configs of Triton's matrix
# multiplication tutorial (triton-lang/triton, python/tutorials/03-matrix-multiplication.py),
# in its order. A GEMM launch tries them first: a 40-iteration walk from a naive 64 x 64 x 32
# seed does not reach them (on the H200 it ended at 64-128 x 256 x 32, docs/benchmarks.md).
GEMM_PRIORS = (
    (128, 256, 64, 8, 3),
    (64, 256, 32, 4, 4),
    (128, 128, 32, 4, 4),
    (128, 64, 32, 4, 4),
    (64, 128, 32, 4, 4),
    (128, 32, 32, 4, 4),
    (64, 32, 32, 2, 5),
    (32, 64, 32, 2, 5),
)


def _priors(current: Config, params: list[Param], an: Analysis, tried: set[frozenset]) -> list[tuple[int, Config]]:
    """GEMM_PRIORS set on each tl.dot launch with named tiles (not on autotune configs), in order;
    a prior whose values some measured config already has (whatever its other parameters) is not
    proposed again."""
    if not an.launch_tiles:
        return []
    choices = {p.key: p.choices for p in params}
    measured = [dict(c) for c in tried]
    out = []
    for stages, warps, bm, bn, bk in an.tile_groups[: an.launch_tiles]:  # autotune configs are the autotuner's list
        for rank, prior in enumerate(GEMM_PRIORS):
            values = {k: v for k, v in zip((bm, bn, bk, warps, stages), prior) if k is not None}
            if any(v not in choices[k] for k, v in values.items()):
                continue
            if any(all(c.get(k) == v for k, v in values.items()) for c in measured):
                continue
            out.append((rank, {**current, **values}))
    return out


def legal(config: Config, an: Analysis) -> bool:
    """Within the tl.dot bounds (the accumulator in registers, the pipelined tiles in shared
    memory; pairwise tile areas where tiles do not name their dimensions), and no literal keyword
    taking a value that would change which grid literals pair with it."""
    for stages, warps, bm, bn, bk in an.tile_groups:
        w = config[warps] if warps is not None else launch.OPTION_DEFAULTS["num_warps"]
        if config[bm] * config[bn] > ACC_PER_WARP * w:
            return False
        if (
            stages is not None
            and config[stages] * (config[bm] * config[bk] + config[bk] * config[bn]) > STAGED_TILE_BOUND
        ):
            return False
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
    code: str,
    measured: dict[frozenset, float],
    rng: random.Random,
    pending: frozenset | set = frozenset(),
    hopper: bool = False,
    interpreted: bool = False,
    space: dict[str, set[int]] | None = None,
    named: frozenset[str] = frozenset(),
) -> tuple[str, Config] | None:
    """A config never measured nor `pending` (being evaluated) nor the current one, nearest first,
    following improvements (pending configs have no score yet, so they steer nothing).

    Stages, each ranked, rng breaking ties: (0) at a tl.dot launch with named tiles, the
    GEMM_PRIORS not yet measured; (1) continue a direction that improved: if
    neighbour A -> current gained, step again the same way; if neighbour N beat current, step
    past N (bigger gains first); (2) an unmeasured neighbour, parameters that the measured
    configs varied least first; (3) two steps (two parameters, or one twice), best summed
    measured gains first; (4) any unmeasured config. None when nothing is left.

    `space` widens each parameter's choices (the values legal around the family's other programs
    that the search tuned from: tuning.py), so that "nothing left" means nothing left in the family.
    """
    an = analyze(code, hopper, interpreted, named)
    if not an.params:
        return None
    params = [
        dataclasses.replace(p, choices=tuple(sorted({*p.choices, *(space or {}).get(p.key, ())}))) for p in an.params
    ]
    current = {p.key: p.value for p in params}
    tried = set(measured) | set(pending) | {frozenset(current.items())}

    def score(cfg: Config | None) -> float | None:
        return None if cfg is None else measured.get(frozenset(cfg.items()))

    base = score(current)
    moves = [(p, d) for p in params for d in (-1, 1)]
    gain = {}  # (key, d) -> measured score change from current to that neighbour
    for p, d in moves:
        s = score(_step(current, p, d))
        gain[p.key, d] = 0.0 if s is None or base is None else s - base
    varied = defaultdict(int)
    for cfg in map(dict, measured):
        for p in params:
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
    for stage in (_priors(current, params, an, tried), continuing, neighbours, two_steps):
        ranked = [
            (rank, rng.random(), i, cfg)
            for i, (rank, cfg) in enumerate(stage)
            if cfg is not None and frozenset(cfg.items()) not in tried and legal(cfg, an)
        ]
        if ranked:
            pick = min(ranked, key=lambda r: r[:3])[3]
            return apply_config(code, pick, hopper, interpreted, named), pick
    pick = _random(params, an, tried, rng)
    return None if pick is None else (apply_config(code, pick, hopper, interpreted, named), pick)


def _random(params: list[Param], an: Analysis, tried: set[frozenset], rng: random.Random) -> Config | None:
    """Any unmeasured legal config; listed exhaustively when the space is small enough."""
    keys = [p.key for p in params]
    size = 1
    for p in params:
        size *= len(p.choices)
    if size <= ENUMERATE_LIMIT:
        options = [
            c
            for values in itertools.product(*(p.choices for p in params))
            if frozenset((c := dict(zip(keys, values))).items()) not in tried and legal(c, an)
        ]
        return rng.choice(options) if options else None
    for _ in range(SAMPLE_TRIES):  # a space this large is practically never exhausted
        c = {p.key: rng.choice(p.choices) for p in params}
        if frozenset(c.items()) not in tried and legal(c, an):
            return c
    return None
