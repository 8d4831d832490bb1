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
