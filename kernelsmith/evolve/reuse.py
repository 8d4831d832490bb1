"""One verdict per program in a run: a program stored already, or being evaluated right now, is
not evaluated again; its copy takes that verdict (`Program.reused_from` names the program).

"The same program" is `kernelsmith.identity`'s: equal up to formatting, comments and docstrings, and
in a search whose judge runs Triton's interpreter (the CPU) up to launch options too, which the
interpreter ignores: there a child that changes only `num_warps` is its parent again, never a second
timing of one computation.
Only a verdict about the program is reused (the service's cache rule: not a timeout, not a lost
worker); after one that is not, the next copy is evaluated itself, and other copies wait for it.
"""

from __future__ import annotations

import asyncio

from kernelsmith.evaluate.result import EvalResult
from kernelsmith.evolve.store import RunStore
from kernelsmith.identity import program_hash


class VerdictReuse:
    def __init__(self, store: RunStore, interpreted: bool = False):
        self.store, self.interpreted = store, interpreted
        self.stored: dict[str, list[int]] = {}  # program hash -> ids of the programs stored with it, oldest first
        # program hash -> (the iteration evaluating it now, done when that iteration is stored or failed)
        self.evaluating: dict[str, tuple[int, asyncio.Future[None]]] = {}

    def load(self, interpreted: bool) -> None:
        """The programs stored already (a resumed run's), once the judge has said whether it interprets."""
        self.interpreted, self.stored = interpreted, {}
        # Two columns only: the rows' messages and verdicts are not needed to know what was evaluated.
        for pid, code in self.store.db.execute("SELECT id, code FROM programs WHERE code IS NOT NULL ORDER BY id"):
            self.add(code, pid)

    def add(self, code: str, program_id: int) -> None:
        """A program is stored (as the run goes, or replayed on resume, in id order)."""
        self.stored.setdefault(program_hash(code, self.interpreted), []).append(program_id)

    async def verdict(self, code: str, iteration: int) -> tuple[int, EvalResult] | None:
        """(id, verdict) of the program whose verdict this code takes; None when it is to be
        evaluated, and then this iteration is the one evaluating it until `release`."""
        key = program_hash(code, self.interpreted)
        while (evaluating := self.evaluating.get(key)) is not None:
            await asyncio.shield(evaluating[1])  # shielded: a cancelled waiter does not cancel the others' wait
        for pid in self.stored.get(key, []):
            record = self.store.get(pid).eval
            verdict = EvalResult.model_validate(record) if record is not None else None
            if verdict is not None and verdict.about_the_candidate:
                return pid, verdict
        self.evaluating[key] = (iteration, asyncio.get_running_loop().create_future())
        return None

    def release(self, iteration: int) -> None:
        """The iteration is stored, or failed: copies waiting for its verdict go on."""
        for key, (owner, done) in list(self.evaluating.items()):
            if owner == iteration:
                del self.evaluating[key]
                done.set_result(None)
