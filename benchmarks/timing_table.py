"""The short table benchmarks/timing_gpu.py prints last (docs/benchmarks.md, "Microsecond timing", says
what each column means)."""

from __future__ import annotations

COLUMNS = (
    ("kernel", 24),
    ("ok", 5),
    ("cand us", 9),
    ("spread", 7),
    ("ref us", 9),
    ("spread", 7),
    ("speedup [min-max]", 22),
    ("eager x", 8),
    ("warm/dbcg", 10),
    ("cold/flush", 11),
    ("ref warm", 9),
    ("ref cold", 9),
    ("judge us", 9),
    ("method", 8),
)


def _num(v, digits: int = 4) -> str:
    return "-" if v is None else f"{v:.{digits}g}"


def _med(summary: dict | None, key: str, scale: float = 1.0) -> float | None:
    s = (summary or {}).get(key)
    return None if s is None else s["median"] * scale


def _spread(summary: dict | None, key: str) -> str:
    s = (summary or {}).get(key)
    return "-" if s is None else f"{s['max_over_min']:.3f}"


def _speedup(summary: dict) -> str:
    s = summary.get("speedup")
    return "-" if s is None else f"{s['median']:.3f} [{s['min']:.3f}-{s['max']:.3f}]"


def _method(summary: dict) -> str:
    methods = summary.get("methods") or []
    names = {"cuda_graph": "graph", "cuda_events_sync": "synced", "cpu_wall": "cpu"}
    return "/".join(names.get(m, m) for m in methods) or "-"


def _line(cells) -> str:
    return " ".join(str(c).ljust(w) for c, (_, w) in zip(cells, COLUMNS)).rstrip()


def _row(row: dict) -> str:
    cold, agree = row["cold"], row.get("agreement") or {}
    return _line(
        (
            row["kernel"],
            f"{cold['successes']}/{cold['verdicts']}",
            _num(_med(cold, "candidate_ms", 1e3)),
            _spread(cold, "candidate_ms"),
            _num(_med(cold, "reference_ms", 1e3)),
            _spread(cold, "reference_ms"),
            _speedup(cold),
            _num(_med(cold, "eager_speedup"), 3),
            _num(agree.get("candidate_warm"), 3),
            _num(agree.get("candidate_cold"), 3),
            _num(agree.get("reference_warm"), 3),
            _num(agree.get("reference_cold"), 3),
            _num(_med(cold, "judge_per_call_ms", 1e3)),
            _method(cold) + (" " + ",".join(cold["flags"]) if cold.get("flags") else ""),
        )
    )


def _cli(cli: dict) -> list[str]:
    runs = cli.get("runs") or []
    speedups = ", ".join(_num(r.get("speedup"), 4) for r in runs)
    cached = ", ".join("cached" if r.get("baseline_cached") else "measured" for r in runs)
    worst = cli.get("max_deviation_from_median")
    verdict = "yes" if cli.get("within_3_percent") else "no"
    return [
        f"{cli['command']} x{len(runs)}: speedups {speedups} (baseline {cached});",
        f"  largest deviation from the median {_num(None if worst is None else 100 * worst, 3)} %"
        f" (within +-3 %: {verdict})",
    ]


def table(pairs: list[dict], kernelbench: list[dict], cli: dict | None, skipped: list[dict], device: str) -> str:
    head = _line(name for name, _ in COLUMNS)
    lines = [head, "-" * len(head)]
    lines += [_row(r) for r in pairs]
    if kernelbench:
        lines.append("KernelBench level 1 (at KernelBench's sizes on CUDA; no warm verdicts, no independent timers):")
        lines += [_row(r) for r in kernelbench]
    lines += [f"skipped {s['kernel']}: {s['why']}" for s in skipped]
    if cli:
        lines += _cli(cli)
    if device != "cuda":
        lines.append(
            f"{device}: the Triton interpreter's wall clock, relative only; the independent timers "
            "(do_bench_cudagraph, the flush-subtracted graph) need CUDA and were skipped"
        )
    return "\n".join(lines)
