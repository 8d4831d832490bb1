"""One evaluated program of a search: what produced it and what the evaluator said."""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field

from kernelsmith.evaluate.measuring.noise import Floors, beyond_noise, pair_noise
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
    0.02), then the higher score, then the older. The archive's cells, elites and best lists and the
    tuner's family leaders rank by it; the run's best is `best_of`'s (beyond noise, not the fastest)."""
    return (not ok, -score, program_id)


def improves_on(new: Program, old: Program | None, floors: Floors | None = None) -> bool:
    """Whether `new` is a success that beats `old` beyond both programs' timing noise:
    new speedup > old speedup * (1 + pair_noise of their stored `eval` records: both candidates'
    noise, and the references' when they were not one measurement; kernelsmith.evaluate.measuring.noise;
    `floors`: the run's measured floors, RunStore.noise_floors()).
    Any success improves on None (no best yet) and on a program that is not a success; a program that
    is not a success improves on nothing. A speedup that was not measured counts as `score_of` counts it (1.0)."""
    if not new.ok:
        return False
    if old is None or not old.ok:
        return True
    return beyond_noise(
        score_of(new.status, new.flags, new.speedup),
        score_of(old.status, old.flags, old.speedup),
        pair_noise(new.eval, old.eval, floors),
    )


def running_best(programs: Iterable[Program], floors: Floors | None = None) -> Iterator[Program | None]:
    """The best after each of `programs`, in the order given: the first success, replaced only by a
    later success that improves on it beyond noise (`improves_on`). None until the first success."""
    best = None
    for p in programs:
        if improves_on(p, best, floors):
            best = p
        yield best


def stored_order(p: Program) -> tuple[int, int]:
    """A program's place in its run: its id (the order the search stored it in); one not stored yet
    comes after every stored one, by iteration."""
    return (p.id if p.id is not None else sys.maxsize, p.iteration)


def best_of(programs: Iterable[Program], floors: Floors | None = None) -> Program | None:
    """The run's best of `programs`: walking the successes in stored (id) order, the best is
    replaced only by a success that improves on it beyond both programs' timing noise, so a later
    program that is faster within noise does not take the place of an earlier one. The one rule
    behind RunStore.best() (so resume's best), the run report's best and its best-so-far line; the
    search takes the same steps (`improves_on`) as it stores each program, so its new bests and
    `improved` flags agree with it. `floors`: the run's measured noise floors (RunStore.noise_floors())."""
    last = deque(running_best(sorted(programs, key=stored_order), floors), maxlen=1)
    return last[0] if last else None


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
