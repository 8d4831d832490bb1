"""The profile of a program, as the mutation prompt shows it: which kernels take the forward's
device time (own or library, launches, share), and where the program stands against the task's
roofline floor. Cut to a character budget (PromptConfig.profile_chars): the heaviest kernels
first, the rest summed in one line.
"""

from __future__ import annotations

from kernelsmith.evaluate.counters import CountersReport, counters_text
from kernelsmith.evaluate.measuring.breakdown import short_name


def _kernel_line(k: dict) -> str:
    calls = k.get("calls") or 0
    launches = f"{calls:g} launch" + ("" if calls == 1 else "es")
    kind = "own" if k.get("own") else "library"
    return f"- {k['share']:.0%} {k['ms']:.4g} ms {short_name(k['name'])} ({kind}, {launches})"


def counters_block(ev: dict, budget: int) -> str:
    """Nsight Compute's view of the heaviest kernels (the verdict's `counters`, when profiled):
    the bottleneck class and the counters behind it, kernel by kernel within `budget` characters."""
    raw = ev.get("counters")
    if not raw:
        return ""
    try:
        rep = CountersReport.model_validate(raw)
    except ValueError:
        return ""
    if rep.status != "ok" or not rep.kernels:
        return ""
    lines = ["hardware counters (Nsight Compute, heaviest kernels):"]
    used = len(lines[0])
    for i, k in enumerate(rep.kernels):
        line = f"- {short_name(k.name)}: {k.bottleneck()}; {counters_text(k)}"
        if i > 0 and used + len(line) > budget:
            break
        lines.append(line)
        used += len(line) + 1
    return "".join(line + "\n" for line in lines)


def profile_parts(ev: dict, budget: int) -> dict[str, str] | None:
    """The template's values ($summary, $kernels, $roofline, $counters) for the verdict record
    `ev`, or None when it has neither a kernel breakdown nor a roofline floor (the CPU, an older
    record). The breakdown takes two thirds of `budget` when there are counters, else all of it."""
    kernels = [k for k in ev.get("kernels") or [] if k.get("ms") is not None and k.get("share") is not None]
    cand, floor = ev.get("candidate_ms"), ev.get("floor_ms")
    if not kernels and not floor:
        return None
    counters = counters_block(ev, budget // 3)
    budget -= len(counters)
    summary = "no kernel records"
    if kernels:
        summary = f"{ev.get('kernel_ms') or sum(k['ms'] for k in kernels):.4g} ms of kernels"
        summary += f" in a measured {cand:.4g} ms" if cand else ""
        own = sum(k["share"] for k in kernels if k.get("own"))
        summary += f"; its own kernels take {own:.0%}, library kernels the rest" if own < 0.995 else ""
    lines: list[str] = []
    used = len(summary)
    for i, k in enumerate(kernels):
        line = _kernel_line(k)
        rest = kernels[i + 1 :]
        if used + len(line) > budget and i > 0:
            rest = kernels[i:]
            lines.append(f"- {sum(r['share'] for r in rest):.0%} in {len(rest)} more kernels")
            break
        lines.append(line)
        used += len(line) + 1
        if not rest:
            break
    roofline = ""
    if floor and cand:
        roofline = (
            f"roofline floor of this task on this GPU: {floor:.4g} ms (bytes moved at the measured copy "
            f"bandwidth, or FLOPs at the measured matmul rate); this program takes {cand / floor:.3g}x the floor\n"
        )
    return {
        "summary": summary,
        "kernels": "".join(line + "\n" for line in lines),
        "roofline": roofline,
        "counters": counters,
    }
