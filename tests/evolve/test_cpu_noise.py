"""Issue 46, item 3: no "new best" on noise in a CPU search. Under Triton's interpreter launch options
change nothing, so the tuner does not propose them there and two programs differing only in them are
one program (one verdict); the CPU's noise floor is measured (the first success evaluated again), not
assumed. The evaluator here is a stand-in timed as a loaded CPU times: a computation's time scaled by
the load of the moment, so that a second timing of one computation can look 3x faster."""

from __future__ import annotations

import asyncio
import re
from concurrent.futures import Future

import pytest
from conftest import case_path

from kernelsmith.evaluate.measuring.noise import METHOD_FLOOR
from kernelsmith.evaluate.result import EvalResult, Status, TimingStats
from kernelsmith.evolve.config import load_config
from kernelsmith.evolve.engine import Engine, Event
from kernelsmith.evolve.program import improves_on
from kernelsmith.evolve.run import progress_line
from kernelsmith.evolve.store import RunStore
from kernelsmith.llm import LLMClient, ScriptedServer
from kernelsmith.task import Task

TASK = Task.from_file(case_path("elementwise_task"))
SEED = case_path("elementwise_small_blocks").read_text()  # BLOCK = 256, launched without options
LAUNCH = "relu_mul_add_kernel[(triton.cdiv(n, BLOCK),)](x, y, out, n, BLOCK=BLOCK"
# The seed with a block the tuner does not tune (not a power of two): on a GPU only its launch options are.
FIXED_BLOCK = SEED.replace("BLOCK = 256", "BLOCK = 96")


class LoadedCpu:
    """Verdicts timed by `cpu_wall`: 10 ms x 256 / BLOCK (the computation) x the load of the moment,
    `loads[k]` for the k-th evaluation (the last one repeated); the reference is one cached measurement."""

    def __init__(self, loads: list[float]):
        self.loads, self.submitted = loads, []

    def submit(self, task, candidate, options=None) -> Future:
        self.submitted.append(candidate)
        load = self.loads[min(len(self.submitted), len(self.loads)) - 1]
        ms = 10.0 * 256 / int(re.search(r"BLOCK = (\d+)", candidate).group(1)) * load
        ref = TimingStats.from_samples([1.0, 1.0, 1.0], method="cpu_wall")
        fut: Future = Future()
        fut.set_result(
            EvalResult(
                status=Status.correct,
                correct=True,
                speedup=1.0 / ms,
                candidate_ms=ms,
                reference_ms=1.0,
                timing=TimingStats.from_samples([ms, ms, ms], method="cpu_wall"),
                reference_timing=ref,
                device="cpu",
            )
        )
        return fut

    def hardware(self) -> Future:
        fut: Future = Future()
        fut.set_result({"device": "cpu", "name": "test", "cores": 2})
        return fut

    def close(self) -> None:
        pass


def search(tmp_path, backend, seed: str, iterations: int, llm_url: str | None = None) -> tuple[dict, list[Event]]:
    data = {
        "iterations": iterations,
        "max_in_flight": 1,
        "archive": {"islands": 1, "migration_interval": 0},
        "evaluation": {"device": "cpu"},
        "operators": {"rewrite": 0, "tune": 1},
    }
    if llm_url is not None:
        data |= {"operators": {"rewrite": 1, "tune": 0}, "llm": {"base_url": llm_url, "models": [{"name": "m"}]}}
    cfg = load_config(None, data)
    events: list[Event] = []
    llm = LLMClient(cfg.llm) if llm_url is not None else None
    engine = Engine(TASK, cfg, tmp_path / "run", backend, llm, seed, on_program=events.append)
    try:
        return asyncio.run(engine.run()), events
    finally:
        engine.store.close()


def test_the_tuner_on_the_cpu_proposes_no_launch_option_so_no_new_best_on_noise(tmp_path):
    """The seed's only tunables on a GPU are num_warps and num_stages (its block is fixed). On the CPU
    the tuner has nothing to propose: the search ends with its start as the best, and never times a
    copy of the seed that the machine's load makes look 3x faster."""
    backend = LoadedCpu([1.0, 1.1, 1.05, 0.3])  # the seed three times (its floor), then a quiet moment
    summary, events = search(tmp_path, backend, FIXED_BLOCK, iterations=3)
    assert backend.submitted == [FIXED_BLOCK] * 3  # the seed, and twice again for the noise floor
    assert [e.improved for e in events] == [True, False]  # the start; then nothing to try
    assert summary["best"]["iteration"] == 0 and summary["tuner"]["configurations_measured"] == 0
    assert summary["stop_reason"] == (
        "the tuner has nothing to try: no correct program has a launch parameter it tunes (on the CPU only "
        "block sizes: Triton's interpreter ignores num_warps and num_stages); a tl.constexpr that is not a block "
        "(BLOCK*, TILE*, ...) is tuned where the config's [tuner] names it"
    )


def test_children_differing_only_in_launch_options_take_their_parents_verdict_on_the_cpu(tmp_path):
    """An LLM's children that change only num_warps / num_stages are the seed again under the
    interpreter: not evaluated again, so not called faster (without this they were timed at 3x)."""
    replies = [
        SEED.replace(LAUNCH + ")", LAUNCH + ", num_warps=8)"),
        SEED.replace(LAUNCH + ")", LAUNCH + ", num_warps=2, num_stages=1)"),
    ]
    backend = LoadedCpu([1.0, 1.1, 1.05, 0.3])
    with ScriptedServer([{"reply": f"```python\n{code}```\n"} for code in replies]) as server:
        summary, events = search(tmp_path, backend, SEED, iterations=2, llm_url=server.url)
    assert backend.submitted == [SEED] * 3
    assert [e.improved for e in events] == [True, False, False] and summary["best"]["iteration"] == 0
    assert [e.program.reused_from for e in events] == [None, 1, 1]
    assert [e.program.speedup for e in events[1:]] == [events[0].program.speedup] * 2
    assert "the verdict of #1 (the same program)" in progress_line(events[1])


def test_the_cpu_noise_floor_is_measured_and_decides_the_best(tmp_path):
    """The seed timed 10, 12 and 11 ms: the floor is (12 - 10) / 10 = 20%, not the assumed 30%. A child
    1.5x faster is then a new best (1.5 > 1 + 20% + 20%), as it would not be with 30% (1.6); the
    store, the summary, a resume and the report agree."""
    from kernelsmith.report import write_run_report
    from kernelsmith.report.run_data import load_run

    backend = LoadedCpu([1.0, 1.2, 1.1, 1.0])
    child = SEED.replace("BLOCK = 256", "BLOCK = 384")  # 1.5x fewer programs (the stand-in's reading)
    with ScriptedServer([{"reply": f"```python\n{child}```\n"}]) as server:
        summary, events = search(tmp_path, backend, SEED, iterations=1, llm_url=server.url)
    floor = summary["noise_floor"]
    assert floor["origin"] == "measured" and floor["method"] == "cpu_wall" and floor["iteration"] == 0
    assert floor["times_ms"] == pytest.approx([10.0, 12.0, 11.0]) and floor["relative"] == pytest.approx(0.2)
    assert floor["relative"] != METHOD_FLOOR["cpu_wall"][0]
    seed, faster = (e.program for e in events)
    assert faster.speedup / seed.speedup == pytest.approx(1.5)
    assert [e.improved for e in events] == [True, True] and summary["best"]["iteration"] == 1
    assert not improves_on(faster, seed)  # by the assumed constant it would be noise
    store = RunStore(tmp_path / "run", create=False)
    assert store.noise_floors() == {"cpu_wall": pytest.approx(0.2)} and store.best().iteration == 1
    store.close()
    run = load_run(tmp_path / "run")
    assert run.best_id == faster.id and run.noise_note == (
        "This run's CPU timings move by 20% between evaluations, measured: iteration 0 evaluated 3 times "
        "(10, 12, 11 ms); each time's noise is at least that."
    )
    page = write_run_report(tmp_path / "run").read_text()  # the chart's caption states the rule, and the floor
    assert "replaced only by a later one faster beyond both programs' timing noise" in " ".join(page.split())
    assert '<span id="chart-noise"></span>' in page and run.noise_note in page


def test_a_failed_measurement_keeps_the_assumed_floor_and_says_why(tmp_path):
    class TimesOutAgain(LoadedCpu):
        def submit(self, task, candidate, options=None) -> Future:
            fut = super().submit(task, candidate, options)
            if len(self.submitted) == 2:
                fut = Future()
                fut.set_result(EvalResult(status=Status.timeout, correct=False, error="timed out", device="cpu"))
            return fut

    summary, _ = search(tmp_path, TimesOutAgain([1.0]), SEED, iterations=0)
    floor = summary["noise_floor"]
    assert floor["origin"] == "assumed" and floor["relative"] == METHOD_FLOOR["cpu_wall"][0]
    assert floor["note"] == "evaluation 2 of iteration 0 ended timeout, not a timed success"
    store = RunStore(tmp_path / "run", create=False)
    assert store.noise_floors() == {}  # the constant holds
    store.close()


def test_a_replaced_start_takes_its_floor_with_it(tmp_path):
    """While no iteration after the start is stored, another --seed replaces the start: its floor is
    measured again, on the new start."""
    first, _ = search(tmp_path, LoadedCpu([1.0, 1.5, 1.2]), SEED, iterations=0)
    assert first["noise_floor"]["relative"] == pytest.approx(0.5)
    other = SEED.replace("BLOCK = 256", "BLOCK = 512")
    again, _ = search(tmp_path, LoadedCpu([1.0, 1.1, 1.0]), other, iterations=0)
    assert again["noise_floor"]["times_ms"] == pytest.approx([5.0, 5.5, 5.0])
    assert again["noise_floor"]["relative"] == pytest.approx(0.1)
