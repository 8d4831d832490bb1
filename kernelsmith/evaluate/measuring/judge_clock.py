"""The judge's clock: the time of a call that the candidate cannot forge, and how it overrules.

Everything measured inside the sandbox (CUDA events, perf_counter, the message that carries
them) runs in the candidate's process, so a candidate can rewrite it. The judge therefore also
times a batch of calls itself: from sending the request to receiving the reply, which the sandbox
sends only after a device-wide synchronize. Each call of the batch runs on freshly refilled
inputs and reports a weighted checksum of its whole output, so no call can skip its work; the
judge subtracts the harness's own per-call work (refill and checksum), which it measures in its
own process. What remains is an upper bound of one call's time.

The sandbox's time counts only within a stated margin of that bound: a call the sandbox says
took less than bound / MARGIN - SLACK is flagged `timing_mismatch`, and the judge's time is used.

Two regimes. "eager": calls one by one from Python (the CPU, and forwards that cannot be captured in a
CUDA graph); each call's host work bounds it, so below ~1 ms a forged time is left to the roofline.
"graph" (kernelsmith.evaluate.measuring.graph_batch): thousands of calls replayed from one CUDA graph with
in-graph checksums, so the request/reply latency and the harness's work are a small part of the span
and the bound holds from a few microseconds up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# Batches: enough calls that the request/reply latency (~0.1 ms) is far below the batch, few
# enough that the judge's re-computation of the references stays cheap.
BATCH_MS = {"cuda": 100.0, "cpu": 200.0}
BATCH_CALLS = {"cuda": (5, 50), "cpu": (2, 6)}
# Batches per evaluation; the fastest counts (a host hiccup inflates one batch, not both). On
# the CPU one: its margin is wide already, and an interpreted batch costs seconds.
BATCHES = {"cuda": 2, "cpu": 1}
# Checksums verified by the judge, drawn after the batch: a call that skipped its work is found
# with probability >= 1 - (1 - skipped share) ** VERIFIED_CALLS.
VERIFIED_CALLS = 8
# The margin, from the H200 (benchmarks/results/archive/redteam_cuda_h200_2026-12-03*.json): calls of 1 ms
# and more took 0.88x to 1.14x their CUDA-event time per call in a batch; calls of ~0.1 ms are
# host-bound there (the harness's Python per call, under the activity recorder): honest ones took
# up to 0.68 ms more in one batch (a softmax on a side stream joined back by an event: 0.77 ms
# against 0.09 ms; 0.29 ms in a quiet probe, benchmarks/probes/batch.py), which the slack absorbs.
# Below ~1 ms a forged time is therefore left to the roofline flag. The CPU (Triton interpreter, a
# shared 2-core machine in CI) is noisier: an honest
# elementwise kernel measured 2.8x its sandbox time in a batch under a parallel test run; a forged
# time there is ~1e-6 ms, so a wide margin still catches it. A native C++ extension call there
# (tests/cases/cpp) takes ~0.4 ms in the sandbox and measured 11.8 ms a call by the judge's clock
# (6 calls) with both cores busy: below a few ms the judge's clock measures the scheduler, which
# the CPU's slack absorbs (interpreted kernels, forged or not, run tens of ms and more).
MARGIN = {"cuda": 2.0, "cpu": 10.0}
SLACK_MS = {"cuda": 0.4, "cpu": 5.0}


# Batches run until the fastest agrees with the sandbox (BATCHES at least, twice that at most).
MAX_BATCHES = {"cuda": 4, "cpu": 1}

# The graph regime. A batch holds about GRAPH_BATCH_MS of calls, between GRAPH_CALLS; its calls read
# GRAPH_SETS distinct input sets in turn (fewer when memory is short: GRAPH_SET_BYTES in all). The
# sandbox's figure is the L2-cold time per call and the judge's the L2-warm one of calls back to back,
# which is no slower: an honest call lands at or below 1x; GRAPH_MARGIN and a slack of GRAPH_SLACK_MS
# spread over the batch (a host hiccup between "go" and the reply) keep it clear of the line.
# The harness's own cost (refills, a checksum after every call, the copy back) is measured by the judge
# HARNESS_GOES times in the same evaluation, and the bound gives the candidate its largest: on an H100
# (benchmarks/results/proof/gate-verdicts/redteam_cuda.json, 2026-12-06) one measurement of it for 4096
# calls ranged 30-46 ms between evaluations of the same task, beside 8.7 ms of 2-us kernels, so a single
# sample moved the judge's per-call time by +-2 us and flagged honest kernels (issue 54). Where the
# harness's spread leaves no time the clock could attribute to the calls, the clock bounds nothing
# (bound 0): a forged time there is left to the eager floor and the roofline, as below ~1 ms eagerly.
GRAPH_BATCH_MS = 20.0
GRAPH_CALLS = (8, 4096)
GRAPH_SETS = 16
GRAPH_SET_BYTES = 2 * 2**30
GRAPH_MARGIN = 1.5
GRAPH_SLACK_MS = 2.0
HARNESS_GOES = 3


def graph_batch_calls(sandbox_ms: float) -> int:
    lo, hi = GRAPH_CALLS
    return int(min(max(math.ceil(GRAPH_BATCH_MS / max(sandbox_ms, 1e-4)), lo), hi))


def graph_batch_sets(calls: int, one_set_bytes: int) -> int:
    return int(max(1, min(calls, GRAPH_SETS, GRAPH_SET_BYTES // max(one_set_bytes, 1))))


def batch_calls(device: str, sandbox_ms: float) -> int:
    lo, hi = BATCH_CALLS[device]
    return int(min(max(math.ceil(BATCH_MS[device] / max(sandbox_ms, 1e-4)), lo), hi))


@dataclass(frozen=True)
class ClockVerdict:
    per_call_ms: float  # the judge's time of one call: wall / calls - harness overhead
    bound_ms: float  # below this, the sandbox's time is not believed
    mismatch: bool


def judge(
    device: str,
    regime: str,
    sandbox_ms: float,
    wall_ms: float,
    calls: int,
    overhead_ms: float,
    overhead_high_ms: float | None = None,
) -> ClockVerdict:
    """`overhead_ms`: the harness's work per call ("eager"), or in the whole batch ("graph": its least
    measured cost, and `overhead_high_ms` its largest, None: measured once)."""
    if regime == "graph":
        per_call = max((wall_ms - overhead_ms) / calls, 0.0)
        high = max(overhead_ms, overhead_high_ms if overhead_high_ms is not None else overhead_ms)
        bound = max((wall_ms - high - GRAPH_SLACK_MS) / calls, 0.0) / GRAPH_MARGIN
    else:
        per_call = max(wall_ms / calls - overhead_ms, 0.0)
        bound = per_call / MARGIN[device] - SLACK_MS[device]
    return ClockVerdict(per_call_ms=per_call, bound_ms=bound, mismatch=sandbox_ms < bound)
