"""One line per mode and measure of a `kernelsmith apply` check (its apply.json): the kernels applied,
each mode's outputs, graph breaks and regions taken, the time before -> after (median, min-max), the
speedup, and the prediction from the kernels' verdicts where capture measured the same time.

    python3 benchmarks/device/apply_summary.py APPLY_JSON LABEL     # e.g. LABEL "batch 32"

Used by benchmarks/device/patch_modes.sh and the proof's model steps (benchmarks/device/proof_models.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _ms(s: dict) -> str:
    return f"{s['median']:.4g} ms ({s['low']:.4g}-{s['high']:.4g})"


def summary_lines(applied: dict, label: str) -> list[str]:
    kernels = [f"{k['name']} {k.get('speedup') or 0:.3g}x" for k in applied.get("kernels", []) if k.get("why") is None]
    left = [f"{k['name']} ({k['why']})" for k in applied.get("kernels", []) if k.get("why") is not None]
    lines = [f"{label}: kernels applied: {', '.join(kernels) or 'none'}"]
    if left:
        lines.append(f"{label}: left out: {'; '.join(left)}")
    p = applied.get("prediction")
    for e in applied.get("checks") or []:
        said = "outputs match" if e.get("outputs_match") else f"outputs differ: {e.get('mismatch')}"
        gb = e.get("graph_breaks") or []
        breaks = f", graph breaks {gb[1]} (unpatched {gb[0]})" if len(gb) == 2 else ""
        lines.append(f"{label} {e.get('mode', 'eager')}: {said}{breaks}; regions taken per forward {e.get('fired')}")
        for t in e.get("timings") or []:
            b, a = t["before_ms"], t["after_ms"]
            speedup = b["median"] / a["median"]
            line = f"{label} {e.get('mode', 'eager')} {t['measure']}: {_ms(b)} -> {_ms(a)}: {speedup:.3g}x"
            if p and e.get("mode", "eager") == "eager" and p.get("measure") == t["measure"]:
                line += f"; predicted {p['speedup']:.3g}x ({p['low']:.3g}-{p['high']:.3g}) over {p['covered']:.1%}"
            lines.append(line)
    for s in applied.get("slower") or []:
        why = f" (accepted: {s['accepted']})" if s.get("accepted") else " (the check fails)"
        lines.append(f"{label} {s.get('mode', 'eager')}: the patched forward is slower in {s.get('measure')}{why}")
    return lines


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: apply_summary.py APPLY_JSON LABEL", file=sys.stderr)
        return 2
    try:
        applied = json.loads(Path(argv[0]).read_text())
    except OSError:
        print(f"{argv[1]}: no apply.json (apply did not finish)")
        return 1
    print("\n".join(summary_lines(applied, argv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
