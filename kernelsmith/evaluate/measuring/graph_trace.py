"""Each call's device time, read from the kernel trace of a CUDA graph's replays: the reading behind
the timing harness's graph method (timing.py, "Device time per call"). No clock of the host is in it,
only the device's own kernel timestamps."""

from __future__ import annotations

from kernelsmith.evaluate.measuring.activity import Activity, KernelSpan


def call_spans(
    spans: list[KernelSpan], marks: frozenset[str], calls: int, replays: int
) -> tuple[list[list[float]], Activity]:
    """Per replay, each call's device time in ms, and the kernels of the calls (marks left out).

    The trace of `replays` replays of a graph [mark, call 0, mark, call 1, ..., call n-1, mark] (other
    kernels, the refills, run between replays). Call k's time runs from the end of the mark before
    it to the end of the last kernel that started before the next mark, whatever its stream; a call
    that launched nothing takes 0. Raises ValueError when the marks are not where the graph put them."""
    ordered = sorted(spans, key=lambda s: (s.start_ns, s.end_ns))
    mark_at = [i for i, s in enumerate(ordered) if s.name in marks]
    per_replay = calls + 1
    if len(mark_at) != replays * per_replay:
        raise ValueError(
            f"{len(mark_at)} marks in the trace of {replays} replays of {calls} calls "
            f"(expected {replays * per_replay}): the forward launches the harness's own mark kernel"
        )
    times: list[list[float]] = []
    act = Activity(windows=replays * calls)
    for r in range(replays):
        row = []
        for k in range(calls):
            a, b = mark_at[r * per_replay + k], mark_at[r * per_replay + k + 1]
            opened = ordered[a].end_ns
            inside = [s for s in ordered[a + 1 : b] if s.name not in marks]
            for s in inside:
                act.kernels[s.name] += 1
                act.kernel_ns[s.name] += s.end_ns - s.start_ns
            row.append(max((s.end_ns - opened for s in inside), default=0) / 1e6)
        times.append(row)
    return times, act
