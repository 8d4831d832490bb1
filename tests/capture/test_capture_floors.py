"""Each region's and the forward's speed of light in `capture` (issue 57): least bytes and FLOPs checked against
hand-computed cases, the floor and its fraction against given ceilings, and the CPU's "no card" (CPU, tiny models)."""

from __future__ import annotations

import json
import textwrap
from io import StringIO
from pathlib import Path

import pytest
import torch
from rich.console import Console

import kernelsmith.cli.capture as cli
from kernelsmith.capture import run as run_module
from kernelsmith.capture.floors import SpeedOfLight, TapeWork, Work, floor_of
from kernelsmith.capture.regions import find_regions
from kernelsmith.capture.run import capture
from kernelsmith.capture.tape import record
from kernelsmith.device import Device
from kernelsmith.evaluate.measuring.roofline import Card, Datasheet

MODELS = """
import torch
import torch.nn as nn


class LinearReLU(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(64, 32)
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(self.proj(x))


def linear_relu():
    torch.manual_seed(0)
    return LinearReLU(), (torch.randn(8, 64),)
"""


class Cached(torch.nn.Module):
    """An embedding's lookup, a projection, its first two rows appended to a cache (index_copy_, in place), a ReLU in
    place on the projection's own output, and a column slice of an input read by a mul."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(100, 16)
        self.proj = torch.nn.Linear(16, 16, bias=False)
        self.register_buffer("cache", torch.zeros(10, 16))

    def forward(self, ids, pos, wide):
        h = self.proj(self.embed(ids))
        self.cache.index_copy_(0, pos, h[:2])
        return h.relu_() * wide[:, :16]


F32, I64 = 4, 8
# x[8,64] @ W[32,64]^T + b[32] -> [8,32], then ReLU: by hand
LINEAR_BYTES = 8 * 64 * F32 + 32 * 64 * F32 + 32 * F32 + 8 * 32 * F32
LINEAR_FLOPS = 2 * 8 * 64 * 32
RELU_BYTES = 2 * 8 * 32 * F32
CARD = Card("Test card", 1e9, 1e12, Datasheet("Test part", 2e9, 4e12))  # 1 GB/s, 1 TFLOP/s


@pytest.fixture
def models(tmp_path: Path) -> Path:
    path = tmp_path / "floor_models.py"
    path.write_text(textwrap.dedent(MODELS))
    return path


def _tasks(out: Path) -> tuple[dict, dict]:
    manifest = json.loads((out / "capture.json").read_text())
    return manifest, {tuple(t["ops"]): t for t in manifest["tasks"]}


def test_a_linear_and_a_relu_move_the_hand_computed_bytes_and_flops_and_the_cpu_has_no_floor(models, tmp_path):
    capture(f"{models}:linear_relu", tmp_path / "out", forwards=1)
    manifest, by_ops = _tasks(tmp_path / "out")
    gemm, relu = by_ops[("addmm.default",)], by_ops[("relu.default",)]
    assert (gemm["bytes"], gemm["flops"]) == (LINEAR_BYTES, LINEAR_FLOPS)  # x, W, b read once, the output written
    assert (relu["bytes"], relu["flops"]) == (RELU_BYTES, 0)  # elementwise work counts no FLOPs
    sol = manifest["speed_of_light"]  # the forward: x, W, b and the output once; the GEMM's output never leaves it
    assert (sol["bytes"], sol["flops"]) == (LINEAR_BYTES, LINEAR_FLOPS)
    # the CPU: no card, so no floor and no fraction, and nothing failed
    assert all(t["floor_ms"] is None and t["of_floor"] is None for t in manifest["tasks"])
    assert sol["card"] is None and sol["floor_ms"] is None and sol["of_floor"] is None


def test_indexed_writes_gathers_in_place_writes_and_slices_count_what_they_touch():
    inputs = (torch.tensor([1, 2, 3, 4]), torch.tensor([5, 6]), torch.randn(4, 64))
    tape = record(Cached().eval(), inputs, {})
    work = TapeWork(tape)
    ids, pos, rows, weight, out = 4 * I64, 2 * I64, 4 * 16 * F32, 16 * 16 * F32, 4 * 16 * F32
    appended = 2 * 16 * F32  # two rows of the cache, not its ten
    column = 4 * 16 * F32  # wide[:, :16] of a [4, 64]: the slice, not the tensor
    # The forward: the embedding's 4 rows of its table (not 100), the projection's weight, the two appended rows,
    # the slice; the ReLU writes the projection's output in place, which never leaves the forward
    assert work.forward() == Work(ids + rows + weight + pos + appended + column + out, 2 * 4 * 16 * 16)
    regions = {tuple(tape.ops[i].name for i in r.ops): r for r in find_regions(tape)}
    assert work.regions([regions[("embedding.default",)]]) == Work(ids + rows + rows)
    assert work.regions([regions[("mm.default",)]]) == Work(rows + weight + rows, 2 * 4 * 16 * 16)
    rest = next(r for ops, r in regions.items() if "index_copy_.default" in ops)
    # h read once and written once in place by relu_ (one storage), pos, the two rows appended, the slice, the product
    assert work.regions([rest]) == Work(rows + pos + appended + column + out)


def test_the_floor_and_its_fraction_follow_the_cards_ceilings(models, tmp_path, monkeypatch):
    monkeypatch.setattr(run_module, "card_of", lambda device: (CARD, None))  # as a CUDA capture's measured card
    done = capture(f"{models}:linear_relu", tmp_path / "out", forwards=1)
    manifest, by_ops = _tasks(tmp_path / "out")
    gemm = by_ops[("addmm.default",)]
    floor = 1e3 * max(LINEAR_BYTES / 1e9, LINEAR_FLOPS / 1e12)  # memory-bound: 11.4 us at 1 GB/s
    assert gemm["floor_ms"] == pytest.approx(floor) and floor == pytest.approx(LINEAR_BYTES / 1e6)
    assert gemm["of_floor"] == pytest.approx(floor / (gemm["time_us"] / 1e3))
    sol = manifest["speed_of_light"]
    assert sol["floor_ms"] == pytest.approx(floor)
    assert sol["of_floor"] == pytest.approx(floor / (manifest["profiled_us"]["median"] / 1e3))
    assert (sol["card"], sol["bandwidth"], sol["peak_flops"]) == ("Test card", 1e9, 1e12)
    assert (sol["datasheet"], sol["datasheet_bandwidth"], sol["datasheet_flops"]) == ("Test part", 2e9, 4e12)
    assert done.speed_of_light is not None
    said = done.speed_of_light.said()
    assert "11.4 kB" in said and "on Test card (measured 1 GB/s, 1 TFLOP/s; datasheet (Test part): 2 GB/s" in said


def test_floor_of_is_the_larger_bound_over_the_measured_time():
    assert floor_of(Work(10**9, 10**12), None, 5.0) == (None, None)  # no card: no floor
    floor, frac = floor_of(Work(2 * 10**9, 10**12), CARD, 4000.0)  # 2 s of bytes, 1 s of FLOPs at CARD
    assert (floor, frac) == (pytest.approx(2000.0), pytest.approx(0.5))
    assert floor_of(Work(10**6, 0), CARD, 0.0) == (pytest.approx(1.0), None)  # no time: no fraction
    assert "no card (the CPU): no floor" in SpeedOfLight.of(Work(10, 0), None, 1.0, "no card (the CPU)").said()


def test_a_card_without_room_for_its_probes_is_captured_without_a_floor(monkeypatch):
    def no_room(cache):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory")

    from kernelsmith.evaluate.measuring import roofline

    monkeypatch.setattr(roofline, "this_card", no_room)
    card, why = run_module.card_of("cuda")
    assert card is None and why is not None and "no room on the card" in why
    assert run_module.card_of("cpu") == (None, "no card (the CPU)")


def test_the_table_shows_each_regions_and_the_forwards_fraction_and_the_cpu_says_no_card(models, tmp_path, monkeypatch):
    monkeypatch.setattr(cli, "console", Console(file=StringIO(), width=400))
    cli.capture_cmd(f"{models}:linear_relu", tmp_path / "out", Device.cpu, None, 0.0, 1, [])
    text = cli.console.file.getvalue()  # type: ignore[attr-defined]
    assert "of SoL" in text and "moves" in text, text
    forward = next(line for line in text.splitlines() if "the whole forward" in line)
    assert "11.4 kB" in forward and "32.8k" in forward and " - " in forward, forward
    assert "speed of light: the forward moves at least 11.4 kB and does 32.8 kFLOP; no card (the CPU): no floor" in text

    monkeypatch.setattr(run_module, "card_of", lambda device: (CARD, None))
    cli.console.file = StringIO()  # type: ignore[attr-defined]
    cli.capture_cmd(f"{models}:linear_relu", tmp_path / "out", Device.cpu, None, 0.0, 1, [])
    text = cli.console.file.getvalue()  # type: ignore[attr-defined]
    gemm = next(line for line in text.splitlines() if "linear.py" in line)
    assert "%" in gemm.split("11.4 kB")[1], gemm  # the GEMM's fraction of its floor
