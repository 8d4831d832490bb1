"""One evaluated program of a search: what produced it and what the evaluator said."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

from kernelsmith.evaluate.result import EvalResult, Status
from kernelsmith.evaluate.verdict import is_success
from kernelsmith.identity import program_hash

NO_PROGRAM = "no_program"  # the reply held no usable program; nothing was evaluated

# Scores of programs that are not plain correct: low, ordered by how close they came, so that a
# repair starts from the nearest miss. A correct, unflagged program scores its speedup.
FAILURE_SCORES = {
    NO_PROGRAM: 0.0,
    Status.rejected.value: 0.0,
    Status.compile_error.value: 0.0,
    Status.timeout.value: 0.01,
    Status.runtime_error.value: 0.01,
    Status.incorrect.value: 0.02,
}
FLAGGED_SCORE = 0.05  # correct but flagged (a cheat: torch doing the work, a forged time, ...)
# The key, in a program's stored `eval` record, of the program whose verdict it copied: the store
# has no column for it and no migrations, and `eval` is the free-form record of the verdict.
REUSED_FROM = "reused_from"


def score_of(status: str, flags: list[str], speedup: float | None) -> float:
    if is_success(status, flags):
        return float(speedup) if speedup is not None else 1.0
    if status == Status.correct.value:
        return FLAGGED_SCORE
    return FAILURE_SCORES.get(status, 0.0)


def rank_key(ok: bool, score: float, program_id: int) -> tuple[bool, float, int]:
    """The one order of programs, best first when sorted ascending by this key: a success before any
    other program whatever its speedup (a correct kernel at 0.01x scores below an incorrect one's
    0.02), then the higher score, then the older. The archive's cells and best lists, the search's
    best, the store's and the report's best all rank by it."""
    return (not ok, -score, program_id)


def best_of(programs: Iterable[Program]) -> Program | None:
    """The best correct, unflagged program of `programs`: the first in `rank_key` order. The one
    definition behind RunStore.best() and the run report's best."""
    return min((p for p in programs if p.ok), key=lambda p: p.rank_key, default=None)


@dataclass
class Program:
    iteration: int
    island: int
    operator: str  # seed | translate | rewrite | diff | crossover | repair | tune
    code: str | None  # None when the reply held no program
    status: str  # an evaluate Status value, or NO_PROGRAM
    parent_id: int | None = None
    inspiration_ids: list[int] = field(default_factory=list)
    model: str | None = None
    messages: list[dict] | None = None  # exactly what was sent
    response: str | None = None  # the raw reply
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    latency_s: float | None = None
    correct: bool = False
    speedup: float | None = None
    speedup_vs_compile: float | None = None
    candidate_ms: float | None = None
    flags: list[str] = field(default_factory=list)
    error: str | None = None
    descriptors: dict[str, float] = field(default_factory=dict)
    skeleton: str | None = None  # the code with its tunable launch literals masked (tuner)
    config: dict[str, int] | None = None  # the values of those literals
    eval: dict | None = None  # the full EvalResult record
    score: float = 0.0
    id: int | None = None  # assigned by the store
    created_at: float = 0.0

    @property
    def code_hash(self) -> str | None:
        return program_hash(self.code) if self.code is not None else None

    @property
    def reused_from(self) -> int | None:
        """The id of the program whose verdict this one carries (the same program up to formatting,
        so it was not evaluated again); None when it was evaluated itself."""
        return (self.eval or {}).get(REUSED_FROM)

    @property
    def ok(self) -> bool:
        """Correct with no flag: the only kind of program the search counts as a success."""
        return is_success(self.status, self.flags)

    @property
    def rank_key(self) -> tuple[bool, float, int]:
        # a program not stored yet gets its id later: after every stored one
        return rank_key(self.ok, self.score, self.id if self.id is not None else sys.maxsize)

    def with_verdict(self, result: EvalResult) -> Program:
        self.status = result.status.value
        self.correct = result.correct
        self.speedup = result.speedup
        self.speedup_vs_compile = result.speedup_vs_compile
        self.candidate_ms = result.candidate_ms
        self.flags = [f.value for f in result.flags]
        self.error = result.error
        self.eval = result.model_dump(mode="json")
        self.score = score_of(self.status, self.flags, self.speedup)
        return self

    def as_dict(self) -> dict:
        return asdict(self)
