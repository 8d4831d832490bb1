"""The tuner inside the search: what has been measured per program skeleton, and proposals from it.

Every stored program with code is annotated with its skeleton (the code with its tunable launch
literals masked) and its config (those literals), whichever operator produced it; so the tuner
never re-proposes a configuration the search has measured, an LLM's included, and moves toward
better-scoring neighbours. Proposals in flight count as measured until their verdict arrives.
"""

from __future__ import annotations

import random

from kernelsmith.evolve import tuner
from kernelsmith.evolve.program import Program


def annotate(program: Program) -> None:
    """Set the program's skeleton and config (None when its code has nothing tunable or fails to parse)."""
    program.skeleton, program.config = None, None
    if not program.code:
        return
    try:
        if not tuner.find_params(program.code):
            return
        program.skeleton = tuner.skeleton_hash(program.code)
        program.config = tuner.config_of(program.code)
    except Exception:  # code the tuner cannot parse (a syntax error, say) is simply not tunable
        return


class TuningMemory:
    def __init__(self):
        self.measured: dict[str, dict[frozenset, float]] = {}
        self.pending: dict[str, set[frozenset]] = {}

    def record(self, skeleton: str | None, config: dict | None, score: float) -> None:
        if skeleton is None or config is None:
            return
        key = frozenset(config.items())
        seen = self.measured.setdefault(skeleton, {})
        seen[key] = max(score, seen.get(key, score))
        self.pending.get(skeleton, set()).discard(key)

    def propose(self, parent: Program, rng: random.Random) -> tuple[str, dict[str, int]] | None:
        """A new variant of the parent's launch parameters, reserved until it is recorded."""
        if parent.skeleton is None or not parent.code:
            return None
        proposal = tuner.propose(
            parent.code, self.measured.get(parent.skeleton, {}), rng, pending=self.pending.get(parent.skeleton, set())
        )
        if proposal is not None:
            self.pending.setdefault(parent.skeleton, set()).add(frozenset(proposal[1].items()))
        return proposal

    def release(self, skeleton: str | None, config: dict | None) -> None:
        if skeleton is not None and config is not None:
            self.pending.get(skeleton, set()).discard(frozenset(config.items()))
