"""A search's pace (issue 56) from stored verdict records: what counts as judged, the phases summed with
the rest as `other`, evaluations a minute of search time, several runs as one, and the line said."""

from __future__ import annotations

import pytest

from kernelsmith.evolve.pace import OTHER, PHASES, Pace, combined, judged_stages, pace_of
from kernelsmith.evolve.program import REUSED_FROM


def record(total: float, **stages: float) -> dict:
    return {"status": "correct", "stages": {**stages, "total": total}}


RECORDS = [
    record(3.0, worker_wait=1.0, load=0.1, correctness=0.4, baseline=1.0, timing=0.4),  # 0.1 s in no stage
    record(1.0, correctness=0.5, timing=0.5),
    {**record(1.0, correctness=0.5, timing=0.5), REUSED_FROM: 2},  # another program's verdict: not judged
    None,  # no program
    {"status": "runtime_error"},  # a record without stages (none stored): not counted
]


def test_only_judged_verdicts_count():
    assert [judged_stages(r) is not None for r in RECORDS] == [True, True, False, False, False]


def test_phases_are_summed_and_the_rest_is_other():
    pace = pace_of(RECORDS, search_s=30.0)
    assert pace.count == 2 and pace.seconds == pytest.approx(4.0)
    assert pace.per_minute == pytest.approx(4.0)  # 2 evaluations in half a minute
    assert set(pace.phases) == {*PHASES, OTHER} and "total" not in pace.phases
    assert pace.phases["correctness"] == pytest.approx(0.9) and pace.phases["timing"] == pytest.approx(0.9)
    assert pace.phases[OTHER] == pytest.approx(0.1)
    assert sum(pace.phases.values()) == pytest.approx(pace.seconds)
    shares = pace.shares()
    assert list(shares)[:4] == ["worker_wait", "baseline", "correctness", "timing"]  # ties in the stages' order
    assert sum(shares.values()) == pytest.approx(1.0)


def test_no_time_no_rate_and_nothing_judged_says_so():
    assert pace_of(RECORDS, search_s=0.0).per_minute is None
    empty = pace_of([None], search_s=10.0)
    assert (empty.count, empty.per_minute, empty.seconds) == (0, 0.0, 0.0)
    assert empty.line() == "evaluations: 0 judged, 0 a minute of search time"


def test_the_line_names_the_rate_and_the_phases_largest_first():
    line = pace_of(RECORDS, search_s=30.0).line()
    assert line.startswith("evaluations: 2 judged, 4 a minute of search time; their time: "), line
    said = line.split("their time: ")[1].split(", ")
    assert said[:2] == ["worker_wait 25%", "baseline 25%"] and "correctness 22%" in said and "other 2%" in said
    assert not any(part.startswith(("static", "build", "settle")) for part in said)  # 0%: left out


def test_several_runs_combine_over_their_summed_time():
    a, b = pace_of(RECORDS[:1], 20.0), pace_of(RECORDS[1:2], 40.0)
    both = combined([a, b], search_s=60.0)
    assert both.count == 2 and both.per_minute == pytest.approx(2.0)
    assert both.phases == pytest.approx(pace_of(RECORDS, 60.0).phases)
    assert Pace.model_validate(both.model_dump()) == both  # summary.json / optimize.json round trip
