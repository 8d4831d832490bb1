"""The speed of light on the command line (issue 57): `kernelsmith eval`'s table shows the candidate's fraction of
its task's floor where the verdict has one (a GPU), and none on the CPU; `kernelsmith cache ceilings` shows each
card's measured ceilings beside its datasheet's."""

from __future__ import annotations

import io
import json

from rich.console import Console

import kernelsmith.cli.cache as cache_cli
from kernelsmith.cli.eval_record import verdict_table
from kernelsmith.evaluate.result import EvalResult


def _text(result: EvalResult) -> str:
    console = Console(file=io.StringIO(), width=300, color_system=None)
    console.print(verdict_table(result, "task", "cand"))
    return console.file.getvalue()  # type: ignore[attr-defined]


def test_the_table_says_the_candidates_fraction_of_the_floor():
    fields = dict(status="correct", correct=True, speedup=1.2, candidate_ms=0.8)
    gpu = _text(EvalResult(device="cuda", gpu_name="NVIDIA H100 80GB HBM3", floor_ms=0.64, **fields))
    row = next(line for line in gpu.splitlines() if "speed of light" in line)
    assert "0.64 ms (the task's floor" in row and "the candidate runs at 80% of it" in row, row
    assert "speed of light" not in _text(EvalResult(device="cpu", **fields))  # no card, no floor


def test_cache_ceilings_shows_each_cards_measured_figures_beside_its_datasheets(tmp_path, monkeypatch, capsys):
    from kernelsmith.evaluate.measuring.baseline_cache import BaselineCache

    monkeypatch.setenv("KERNELSMITH_CACHE_DIR", str(tmp_path))
    cache = BaselineCache()
    cache.put(
        "ceilings|NVIDIA H100 80GB HBM3|2.13", "NVIDIA H100 80GB HBM3", "2.13", "", {"bandwidth": 3.0e12, "flops": 7e14}
    )
    cache.put("ceilings|Some card|2.13", "Some card", "2.13", "", {"bandwidth": 1e12, "flops": 1e14})
    cache.put("NVIDIA H200|2.13|aaaa|v4", "NVIDIA H200", "2.13", "aaaa", {"reference": None})  # a baseline: not a card
    monkeypatch.setattr(cache_cli, "console", Console(file=io.StringIO(), width=300, color_system=None))
    cache_cli.cache_ceilings_cmd(json_out=False)
    text = cache_cli.console.file.getvalue()  # type: ignore[attr-defined]
    h100 = next(line for line in text.splitlines() if "H100" in line)
    assert "3 TB/s" in h100 and "3.35 TB/s (H100 SXM)" in h100 and "700 TFLOP/s" in h100 and "989 TFLOP/s" in h100
    assert "(2 cards)" in " ".join(text.split()) and "Some card" in text  # the cache's path may wrap the line
    cache_cli.cache_ceilings_cmd(json_out=True)
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["name"] for r in rows] == ["NVIDIA H100 80GB HBM3", "Some card"] and rows[1]["datasheet"] is None
