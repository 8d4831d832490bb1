"""kernelsmith.evaluate.measuring.roofline: the physical floor of a task against given ceilings."""

from __future__ import annotations

import pytest
import torch

from kernelsmith.evaluate.measuring import roofline

CEILINGS = {"bandwidth": 1e12, "flops": 1e15}  # 1 TB/s, 1 PFLOP/s


# --- floor_ms --------------------------------------------------------------------------------


def test_floor_of_a_memory_bound_task_is_bytes_over_bandwidth_in_ms():
    # 1 GB at 1 TB/s = 1 ms; 1 GFLOP at 1 PFLOP/s = 1 us
    assert roofline.floor_ms(10**9, 10**9, CEILINGS) == pytest.approx(1.0)


def test_floor_of_a_compute_bound_task_is_flops_over_rate_in_ms():
    # 1 MB -> 1 us; 2e12 FLOPs at 1 PFLOP/s -> 2 ms
    assert roofline.floor_ms(10**6, 2 * 10**12, CEILINGS) == pytest.approx(2.0)


def test_floor_is_the_larger_bound_not_their_sum():
    both = roofline.floor_ms(10**9, 10**12, CEILINGS)  # 1 ms and 1 ms
    assert both == pytest.approx(1.0)


def test_floor_of_a_task_without_flops_is_its_memory_time():
    assert roofline.floor_ms(5 * 10**8, 0, CEILINGS) == pytest.approx(0.5)


def test_floor_of_nothing_is_zero():
    assert roofline.floor_ms(0, 0, CEILINGS) == 0.0


def test_floor_scales_inversely_with_the_ceilings():
    fast = roofline.floor_ms(10**9, 0, {"bandwidth": 2e12, "flops": 1e15})
    assert fast == pytest.approx(0.5)


def test_floor_needs_both_ceilings():
    with pytest.raises(KeyError):
        roofline.floor_ms(1, 1, {"bandwidth": 1e12})


def test_floor_margin_is_a_fraction_below_one():
    assert 0.0 < roofline.FLOOR_MARGIN < 1.0


# --- tensor_bytes ----------------------------------------------------------------------------


def test_bytes_of_one_tensor():
    assert roofline.tensor_bytes([torch.zeros(10, dtype=torch.float32)]) == 40


def test_bytes_follow_the_dtype():
    assert roofline.tensor_bytes([torch.zeros(10, dtype=torch.float16), torch.zeros(3, dtype=torch.int64)]) == 20 + 24


def test_a_storage_shared_by_views_counts_once():
    x = torch.zeros(4, 4)
    assert roofline.tensor_bytes([x, x[1:], x.t(), x.view(16)]) == 64


def test_the_same_tensor_twice_counts_once():
    x = torch.zeros(8)
    assert roofline.tensor_bytes([x, x]) == 32


def test_a_view_counts_its_whole_storage():
    x = torch.zeros(100)
    assert roofline.tensor_bytes([x[:10]]) == 400


def test_nested_lists_and_tuples_are_walked():
    a, b, c = torch.zeros(1), torch.zeros(2), torch.zeros(3)
    assert roofline.tensor_bytes([a, (b, [c, (a,)])]) == 4 * (1 + 2 + 3)


def test_non_tensors_count_nothing():
    assert roofline.tensor_bytes([3, 2.5, None, "text", torch.zeros(2)]) == 8


def test_a_bare_tensor_is_accepted():
    assert roofline.tensor_bytes(torch.zeros(5)) == 20


def test_nothing_is_zero_bytes():
    assert roofline.tensor_bytes([]) == 0
    assert roofline.tensor_bytes([torch.zeros(0)]) == 0


# --- count_flops -----------------------------------------------------------------------------
# FlopCounterMode imports torch._dynamo on first use (seconds), so these tests give count_flops a
# fake counter with FlopCounterMode's interface; what torch counts per operator is torch's business.


class FakeFlopCounter:
    """FlopCounterMode's interface, with the counts the test gives it; records what ran inside it."""

    counts: dict = {}
    entered = 0

    def __init__(self, display: bool = True):
        assert display is False, "count_flops must not print a table"

    def __enter__(self):
        FakeFlopCounter.entered += 1
        return self

    def __exit__(self, *exc):
        return False

    def get_flop_counts(self):
        return {"Global": dict(self.counts)} if self.counts else {}

    def get_total_flops(self):
        return sum(self.counts.values())


@pytest.fixture
def fake_counter(monkeypatch):
    import torch.utils.flop_counter

    monkeypatch.setattr(torch.utils.flop_counter, "FlopCounterMode", FakeFlopCounter)
    monkeypatch.setattr(FakeFlopCounter, "counts", {})
    monkeypatch.setattr(FakeFlopCounter, "entered", 0)
    return FakeFlopCounter


class Probe(torch.nn.Module):
    """Records whether autograd was on and whether the counter was active when forward ran."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def forward(self, *inputs):
        self.seen.append((torch.is_grad_enabled(), FakeFlopCounter.entered, len(inputs)))
        return inputs[0]


aten = torch.ops.aten


def test_flops_are_the_counters_total(fake_counter):
    fake_counter.counts = {aten.mm.default: 300, aten.bmm.default: 200}
    assert roofline.count_flops(Probe(), (torch.zeros(1),)) == 500


def test_attention_flops_count_half(fake_counter):
    fake_counter.counts = {aten._scaled_dot_product_efficient_attention.default: 1000, aten.mm.default: 300}
    assert roofline.count_flops(Probe(), (torch.zeros(1),)) == 300 + 500


@pytest.mark.parametrize(
    "op",
    [
        aten._scaled_dot_product_flash_attention.default,
        aten._scaled_dot_product_efficient_attention.default,
        aten._scaled_dot_product_cudnn_attention.default,
    ],
)
def test_every_attention_kernel_counts_half(fake_counter, op):
    fake_counter.counts = {op: 4000}
    assert roofline.count_flops(Probe(), (torch.zeros(1),)) == 2000


def test_a_model_without_flops_counts_zero(fake_counter):
    assert roofline.count_flops(Probe(), (torch.zeros(1),)) == 0


def test_flops_are_an_int(fake_counter):
    fake_counter.counts = {aten.mm.default: 7}
    assert type(roofline.count_flops(Probe(), (torch.zeros(1),))) is int


def test_the_model_runs_once_inside_the_counter_without_autograd(fake_counter):
    model = Probe()
    roofline.count_flops(model, (torch.zeros(2, requires_grad=True), torch.zeros(3)))
    assert model.seen == [(False, 1, 2)]  # inputs unpacked as positional arguments


# --- the least bytes of views (capture's regions) ----------------------------------------------


def test_a_views_extent_is_its_first_byte_its_span_and_what_it_holds():
    assert roofline.view_extent(0, (4, 16), (16, 1), 4) == (0, 256, 256)
    assert roofline.view_extent(8, (4, 16), (64, 1), 4) == (32, (3 * 64 + 16) * 4, 256)  # a column slice
    assert roofline.view_extent(0, (16, 16), (1, 16), 2) == (0, 512, 512)  # a transpose spans what it holds
    assert roofline.view_extent(0, (0, 16), (16, 1), 4)[1:] == (0, 0)


def test_a_storage_counts_each_byte_its_views_touch_once():
    whole, transposed = roofline.view_extent(0, (4, 4), (4, 1), 4), roofline.view_extent(0, (4, 4), (1, 4), 4)
    assert roofline.storage_bytes([whole, transposed, whole]) == 64
    top, overlapping = roofline.view_extent(0, (2, 4), (4, 1), 4), roofline.view_extent(4, (2, 4), (4, 1), 4)
    assert roofline.storage_bytes([top, overlapping]) == 48  # rows 0-1 and 1-2: three rows
    column = roofline.view_extent(0, (4, 1), (4, 1), 4)  # one column spans the rows between, holds 4 elements
    assert roofline.storage_bytes([column]) == 16
    assert roofline.storage_bytes([]) == 0


# --- one op's FLOPs (capture's tape) ------------------------------------------------------------


def _meta(*shape):
    return torch.empty(shape, device="meta")


def test_an_ops_flops_are_torchs_formula_and_attention_counts_half():
    a, b = _meta(8, 64), _meta(64, 32)
    assert roofline.op_flops(aten.mm.default, (a, b), {}, _meta(8, 32)) == 2 * 8 * 64 * 32
    assert roofline.op_flops(aten.addmm.default, (_meta(32), a, b), {}, _meta(8, 32)) == 2 * 8 * 64 * 32
    q, k = _meta(1, 2, 4, 8), _meta(1, 2, 16, 8)
    full = 2 * 2 * (2 * 4 * 16 * 8)  # q @ k^T and p @ v, a multiply and an add per element of each, 2 heads
    cpu = aten._scaled_dot_product_flash_attention_for_cpu.default  # counted by the GPU op's formula
    assert roofline.op_flops(cpu, (q, k, k), {}, (_meta(1, 2, 4, 8),)) == full - full // 2
    assert roofline.op_flops(aten.relu.default, (a,), {}, a) == 0  # elementwise: no formula, no FLOPs


# --- the weights a forward reads (the judge's task bytes) ---------------------------------------


class HalfUsed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.used = torch.nn.Linear(4, 4)
        self.unused = torch.nn.Linear(4, 1000)  # a weight no forward reads is no byte a kernel moves

    def forward(self, x):
        return self.used(x)


def test_the_weights_a_forward_reads_are_those_it_touches():
    model = HalfUsed()
    read = roofline.weights_read(model, [torch.zeros(2, 4)])
    assert {id(w) for w in read} == {id(model.used.weight), id(model.used.bias)}
    assert roofline.tensor_bytes(read) == (16 + 4) * 4
    assert roofline.weights_read(lambda x: x, [torch.zeros(1)]) == []  # a task whose Model is no module


# --- the card's ceilings: measured once, cached, the datasheet beside --------------------------


def test_a_cards_ceilings_are_measured_once_and_cached(tmp_path, monkeypatch):
    from kernelsmith.evaluate.measuring.baseline_cache import BaselineCache

    measured = []
    monkeypatch.setattr(roofline, "measure_ceilings", lambda: measured.append(1) or dict(CEILINGS))
    cache = BaselineCache(tmp_path / "baselines.sqlite")
    assert roofline.card_ceilings("NVIDIA H100 80GB HBM3", "2.13", cache) == CEILINGS
    assert roofline.card_ceilings("NVIDIA H100 80GB HBM3", "2.13", cache) == CEILINGS and len(measured) == 1
    roofline.card_ceilings("NVIDIA H100 80GB HBM3", "2.13", None)  # --no-cache: measured, nothing stored
    assert len(measured) == 2 and len(cache.entries()) == 1
    [(torch_version, card)] = roofline.stored_cards(cache)
    assert torch_version == "2.13" and card.ceilings == CEILINGS
    assert card.datasheet == roofline.Datasheet("H100 SXM", 3.35e12, 989e12)


def test_datasheets_are_named_exactly():
    assert roofline.DATASHEETS["NVIDIA H200"].bandwidth == 4.8e12
    assert "NVIDIA H200 NVL" not in roofline.DATASHEETS and "NVIDIA H100 PCIe" not in roofline.DATASHEETS


def test_without_cuda_there_is_no_card(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert roofline.this_card(None) is None


# --- fractions ------------------------------------------------------------------------------------


def test_the_fraction_of_a_floor_is_floor_over_time():
    assert roofline.of_floor(0.64, 0.8) == pytest.approx(0.8)
    assert roofline.of_floor(None, 0.8) is None and roofline.of_floor(0.64, None) is None
    assert roofline.of_floor(0.64, 0.0) is None
    assert [roofline.fraction(x) for x in (0.8, 0.045, 0.00012, None)] == ["80%", "4.5%", "0.012%", "-"]
    assert roofline.amount(1.92e9, "B") == "1.92 GB" and roofline.amount(32768, "") == "32.8k"


def test_the_judges_floor_counts_the_weights_unless_the_l2_stays_warm():
    from types import SimpleNamespace

    from kernelsmith.evaluate.judging.judge import Judge

    judge = SimpleNamespace(device="cuda", ceilings=lambda use_cache: CEILINGS)
    baseline = {"task_bytes": 10**9, "weight_bytes": 10**9, "task_flops": 0}
    assert Judge.floor_ms(judge, baseline) == pytest.approx(2.0)  # type: ignore[arg-type]
    assert Judge.floor_ms(judge, baseline, warm_l2=True) == pytest.approx(1.0)  # type: ignore[arg-type]
    assert Judge.floor_ms(judge, {"task_bytes": 10**9}) == pytest.approx(1.0)  # type: ignore[arg-type]
    assert Judge.floor_ms(SimpleNamespace(device="cpu"), baseline) is None  # type: ignore[arg-type]
