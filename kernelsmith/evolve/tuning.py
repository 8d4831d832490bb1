"""The tuner inside the search: what has been measured per program skeleton, and proposals from it.

Every stored program with code is annotated with its skeleton (the code with its tunable launch
literals masked) and its config (those literals), whichever operator produced it; so the tuner
never re-proposes a configuration the search has measured, an LLM's included, and moves toward
better-scoring neighbours. Proposals in flight count as measured until their verdict arrives.
Programs sharing a skeleton are a family. A parameter's legal values depend on the program
tuned from (a block ranges over /16 .. x16 of its value, within 16 .. 16384): the family's space is the union of
those, over every program it was tuned from. The best correct program of each family is
remembered, so a search stops for want of proposals only when no unmeasured configuration
is left in the space of any family.
"""

from __future__ import annotations

import random

from kernelsmith.evolve import tuner, tuner_search
from kernelsmith.evolve.program import Program, rank_key
from kernelsmith.progress import counted


def hopper_or_newer(hardware: dict) -> bool:
    """Compute capability 9 or above (Hopper's launch options, num_ctas), from the judge's hardware record."""
    try:
        return int(str(hardware.get("capability", "0")).split(".")[0]) >= 9
    except ValueError:
        return False


def runs_in_interpreter(hardware: dict) -> bool:
    """The judge runs kernels in Triton's interpreter (on the CPU), which ignores launch options."""
    return hardware.get("device") == "cpu"


def annotate(
    program: Program, hopper: bool = False, interpreted: bool = False, named: frozenset[str] = frozenset()
) -> None:
    """Set the program's skeleton and config (None when its code has nothing tunable or fails to parse)."""
    program.skeleton, program.config = None, None
    if not program.code:
        return
    try:
        if not tuner.find_params(program.code, hopper, interpreted, named):
            return
        program.skeleton = tuner.skeleton_hash(program.code, hopper, interpreted, named)
        program.config = tuner.config_of(program.code, hopper, interpreted, named)
    except Exception:  # code the tuner cannot parse (a syntax error, say) is simply not tunable
        return


class TuningMemory:
    def __init__(self, hopper: bool = False, interpreted: bool = False, named: frozenset[str] = frozenset()):
        self.hopper = hopper  # the judge's GPU is Hopper or newer: num_ctas is tunable too
        self.interpreted = interpreted  # Triton's interpreter (the CPU): no launch option is tunable
        self.named = named  # constexprs the user names to be tuned besides the block-like ones ([tuner])
        self.measured: dict[str, dict[frozenset, float]] = {}
        self.pending: dict[str, set[frozenset]] = {}
        self.leaders: dict[str, tuple[float, int]] = {}  # skeleton -> (score, id) of its best correct program
        # skeleton -> parameter -> values legal around any program tuned from: the family's space
        self.space: dict[str, dict[str, set[int]]] = {}

    def record(
        self, skeleton: str | None, config: dict | None, score: float, pid: int | None = None, ok: bool = False
    ) -> None:
        if skeleton is None or config is None:
            return
        key = frozenset(config.items())
        seen = self.measured.setdefault(skeleton, {})
        seen[key] = max(score, seen.get(key, score))
        self.pending.get(skeleton, set()).discard(key)
        if ok and pid is not None and (skeleton not in self.leaders or score > self.leaders[skeleton][0]):
            self.leaders[skeleton] = (score, pid)

    def leader_ids(self) -> list[int]:
        """The best correct program of every family, best first."""
        return [pid for _, pid in sorted(self.leaders.values(), key=lambda sp: rank_key(True, *sp))]

    def propose(self, parent: Program, rng: random.Random) -> tuple[str, dict[str, int]] | None:
        """A new variant of the parent's launch parameters, reserved until it is recorded."""
        if parent.skeleton is None or not parent.code:
            return None
        space = self.space.setdefault(parent.skeleton, {})
        for p in tuner.find_params(parent.code, self.hopper, self.interpreted, self.named):
            space.setdefault(p.key, set()).update(p.choices)
        proposal = tuner_search.propose(
            parent.code,
            self.measured.get(parent.skeleton, {}),
            rng,
            pending=self.pending.get(parent.skeleton, set()),
            hopper=self.hopper,
            interpreted=self.interpreted,
            space=space,
            named=self.named,
        )
        if proposal is not None:
            self.pending.setdefault(parent.skeleton, set()).add(frozenset(proposal[1].items()))
        return proposal

    def release(self, skeleton: str | None, config: dict | None) -> None:
        if skeleton is not None and config is not None:
            self.pending.get(skeleton, set()).discard(frozenset(config.items()))

    def exhausted(self) -> str:
        """Why the tuner stopped: how much it measured, in how many families."""
        n = len(self.space)
        if n == 0:
            where = " (on the CPU only block sizes: Triton's interpreter ignores num_warps and num_stages)"
            named = (
                "; a tl.constexpr that is not a block (BLOCK*, TILE*, ...) is tuned where the config's [tuner] names it"
            )
            return (
                "the tuner has nothing to try: no correct program has a launch parameter it tunes"
                + (where if self.interpreted else "")
                + named
            )
        families = "the program family it tuned" if n == 1 else f"the {n} program families it tuned"
        measured = self.stats()["configurations_measured"]
        return (
            f"the tuner has nothing left to try: every launch configuration within reach of {families} "
            f"is measured ({counted(measured, 'configuration')} measured)"
        )

    def stats(self) -> dict:
        """summary.json's "tuner": configurations measured (any operator's), families, those with a correct one."""
        return {
            "configurations_measured": sum(len(v) for v in self.measured.values()),
            "families": len(self.measured),
            "families_correct": len(self.leaders),
            "families_tuned": len(self.space),
            "hopper_options": self.hopper,
        }
