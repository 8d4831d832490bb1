"""One verdict per program in a run: a program stored already, or being evaluated right now, is
not evaluated again; its copy takes that verdict (`Program.reused_from` names the program).

"The same program" is `kernelsmith.identity`'s: equal up to formatting, comments and docstrings.
Only a verdict about the program is reused (the service's cache rule: not a timeout, not a lost
worker); after one that is not, the next copy is evaluated itself, and other copies wait for it.
"""

from __future__ import annotations

import asyncio

from kernelsmith.evaluate.result import EvalResult
from kernelsmith.evolve.store import RunStore
from kernelsmith.identity import program_hash


class VerdictReuse:
    def __init__(self, store: RunStore):
        self.store = store
        self.stored: dict[str, list[int]] = {}  # program hash -> ids of the programs stored with it, oldest first
        # program hash -> (the iteration evaluating it now, done when that iteration is stored or failed)
        self.evaluating: dict[str, tuple[int, asyncio.Future[None]]] = {}

    def add(self, code: str, program_id: int) -> None:
        """A program is stored (as the run goes, or replayed on resume, in id order)."""
        self.stored.setdefault(program_hash(code), []).append(program_id)

    async def verdict(self, code: str, iteration: int) -> tuple[int, EvalResult] | None:
        """(id, verdict) of the program whose verdict this code takes; None when it is to be
        evaluated, and then this iteration is the one evaluating it until `release`."""
        key = program_hash(code)
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
