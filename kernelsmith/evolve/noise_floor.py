"""A CPU search's noise floor, measured rather than assumed.

Wall time on a shared CPU moves with the machine's load between two evaluations far more than
within one (the repetitions of one evaluation agree to ~1% while six evaluations of one computation
ranged 4x on a loaded 2-core machine), so no constant is right for it. Before the run's first success
is stored, its code is evaluated REPEATS more times; the spread of its times over those evaluations,
(max - min) / min, is the run's `cpu_wall` floor (kernelsmith.evaluate.measuring.noise.NoiseFloor),
stored in the run's meta table (`noise_floor`) and so used by every comparison of the run's programs:
the search's new bests, RunStore.best() (resume, summary, best.py, `data rl`), the report and `data
sft`. Programs that finish meanwhile wait for it, so no comparison is made with another floor.

Only a first success timed by `cpu_wall` is measured (the CPU's method). When an evaluation again is
not a timed success (a timeout under load), the floor is METHOD_FLOOR's, stored as "assumed" with
the reason. A run resumed with successes stored and no floor (an older version's) keeps the constant.
"""

from __future__ import annotations

import asyncio

from kernelsmith.errors import TaskError, UserError
from kernelsmith.evaluate.measuring.noise import NoiseFloor
from kernelsmith.evaluate.pool import EvalBackend
from kernelsmith.evolve.program import Program
from kernelsmith.evolve.store import NOISE_FLOOR, RunStore
from kernelsmith.task import Task

METHOD = "cpu_wall"  # the timing method whose floor a search measures
REPEATS = 2  # evaluations beyond the program's own: three times in all


def cpu_timed(program: Program) -> float | None:
    """The program's median time when it is a success timed by `cpu_wall`; else None."""
    timing = (program.eval or {}).get("timing") or {}
    return timing.get("median_ms") if program.ok and timing.get("method") == METHOD else None


class NoiseFloorProbe:
    def __init__(self, store: RunStore, backend: EvalBackend, task: Task):
        self.store, self.backend, self.task = store, backend, task
        self._measuring: asyncio.Future[None] | None = None

    @property
    def floors(self) -> dict[str, float]:
        """The run's measured floors, as `improves_on` takes them (read from the store: a replaced
        start takes its floor with it)."""
        return self.store.noise_floors()

    async def settle(self, program: Program, first_success: bool) -> None:
        """Before `program` is stored: when it is the run's first success (`first_success`: none is
        stored yet) and was timed on the CPU, and no floor is known, measure the floor on it; while one
        is being measured, wait for it."""
        while self._measuring is not None:
            await asyncio.shield(self._measuring)
        if self.store.get_meta(NOISE_FLOOR) is not None or not first_success or cpu_timed(program) is None:
            return
        self._measuring = asyncio.get_running_loop().create_future()
        try:
            record = await self._measure(program)
            self.store.set_meta(NOISE_FLOOR, record.model_dump(mode="json"))
        finally:
            self._measuring.set_result(None)
            self._measuring = None

    async def _measure(self, program: Program) -> NoiseFloor:
        first = cpu_timed(program)
        if first is None or not program.code:
            raise ValueError("only a success timed on the CPU has its floor measured")
        times = [first]
        for n in range(2, REPEATS + 2):
            try:
                result = await asyncio.wrap_future(self.backend.submit(self.task, program.code))
            except TaskError as exc:
                raise UserError(str(exc)) from None
            timing = result.timing
            if not result.success or timing is None or timing.method != METHOD or timing.median_ms <= 0:
                note = (
                    f"evaluation {n} of iteration {program.iteration} ended {result.status.value}, not a timed success"
                )
                return NoiseFloor.assumed(METHOD, note, program.iteration, times)
            times.append(timing.median_ms)
        if min(times) <= 0:
            return NoiseFloor.assumed(METHOD, "a time of 0 ms", program.iteration, times)
        return NoiseFloor.measured(METHOD, times, program.iteration)
