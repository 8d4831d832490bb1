"""kernelsmith.evaluate.checks: the one place that decides whether outputs match, and says how not."""

from __future__ import annotations

import math

import pytest
import torch

from kernelsmith.evaluate.checks import compare_outputs, compare_tensor, flatten_outputs, tolerances


def cmp(ref, got, atol=None, rtol=None, label="output"):
    a, r = tolerances(ref.dtype, atol, rtol)
    return compare_tensor(ref, got, a, r, label)


# -- tolerances --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dtype, expected",
    [
        (torch.float64, (1e-6, 1e-6)),
        (torch.float32, (1e-4, 1e-4)),
        (torch.float16, (1e-2, 1e-2)),
        (torch.bfloat16, (1e-2, 1e-2)),
        (torch.int64, (0.0, 0.0)),
        (torch.int32, (0.0, 0.0)),
        (torch.uint8, (0.0, 0.0)),
        (torch.bool, (0.0, 0.0)),
    ],
)
def test_tolerances_by_dtype(dtype, expected):
    assert tolerances(dtype) == expected


def test_tolerances_overrides():
    assert tolerances(torch.float32, atol=1e-3) == (1e-3, 1e-4)
    assert tolerances(torch.float32, rtol=0.5) == (1e-4, 0.5)
    assert tolerances(torch.int64, atol=1.0, rtol=0.0) == (1.0, 0.0)


def test_narrow_float_types_get_loose_tolerance():
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("no float8 in this torch")
    assert tolerances(torch.float8_e4m3fn) == (1e-2, 1e-2)


# -- compare_tensor ----------------------------------------------------------------------------


def test_equal_tensors_pass():
    x = torch.randn(8, 16)
    c = cmp(x, x.clone())
    assert c.ok and c.max_abs_err == 0.0 and c.message is None


def test_within_tolerance_passes():
    x = torch.randn(8, 16)
    c = cmp(x, x + 5e-5)
    assert c.ok
    assert 0 < c.max_abs_err <= 1e-4


def test_shape_mismatch():
    c = cmp(torch.zeros(3, 4), torch.zeros(4, 3), label="output 1")
    assert not c.ok
    assert c.message == "output 1: shape (4, 3) but expected (3, 4)"


def test_shape_mismatch_keepdim():
    c = cmp(torch.zeros(64), torch.zeros(64, 1))
    assert not c.ok
    assert "shape (64, 1) but expected (64,)" in c.message


def test_dtype_mismatch():
    c = cmp(torch.zeros(3, dtype=torch.float32), torch.zeros(3, dtype=torch.float64))
    assert not c.ok
    assert c.message == "output: dtype torch.float64 but expected torch.float32"


def test_nan_where_reference_is_finite_fails():
    ref = torch.ones(4, 5)
    got = ref.clone()
    got[2, 3] = float("nan")
    c = cmp(ref, got)
    assert not c.ok
    assert "1 of 20 elements" in c.message
    assert "1 element is NaN where the reference is finite" in c.message
    assert "worst at [2, 3]: expected 1, got nan" in c.message


def test_inf_where_reference_is_finite_fails():
    ref = torch.ones(10)
    got = ref.clone()
    got[7] = float("inf")
    c = cmp(ref, got)
    assert not c.ok
    assert "1 element is inf where the reference is finite" in c.message
    assert "worst at [7]" in c.message


def test_a_nan_mismatch_is_the_max_abs_err_not_left_out_of_it():
    """Issue 29: the message named a NaN as the worst element and gave the finite part's max abs err."""
    ref = torch.ones(4, 5)
    got = ref.clone()
    got[0, 0] = 3.0  # a finite mismatch beside the NaNs
    got[2, 3] = got[3, 1] = float("nan")
    got[1, 1] = float("inf")
    c = cmp(ref, got)
    assert not c.ok and math.isnan(c.max_abs_err) and math.isnan(c.max_rel_err)
    assert "max abs err nan, max rel err nan" in c.message
    assert "2 elements are NaN where the reference is finite" in c.message
    assert "1 element is inf where the reference is finite" in c.message
    assert c.message.count("where the reference is") == 2


def test_an_inf_mismatch_is_an_inf_max_abs_err():
    ref = torch.ones(10)
    got = ref.clone()
    got[2] = 4.0
    got[7] = -float("inf")
    c = cmp(ref, got)
    assert not c.ok and c.max_abs_err == math.inf
    assert "max abs err inf" in c.message


@pytest.mark.parametrize(
    "ref_value, got_value, max_err, says",
    [
        (float("nan"), 0.0, math.nan, "1 element is not NaN where the reference is NaN"),
        (float("inf"), 0.0, math.inf, "1 element is not the same inf where the reference is inf"),
        (float("inf"), -float("inf"), math.inf, "1 element is not the same inf where the reference is inf"),
    ],
    ids=["nan-reference", "inf-reference", "opposite-inf"],
)
def test_a_nan_or_inf_reference_missed_is_counted_the_other_way(ref_value, got_value, max_err, says):
    ref = torch.tensor([1.0, ref_value, 2.0])
    c = cmp(ref, torch.tensor([1.0, got_value, 2.0]))
    assert not c.ok
    assert says in c.message
    assert math.isnan(c.max_abs_err) if math.isnan(max_err) else c.max_abs_err == max_err


def test_a_finite_mismatch_beside_a_shared_nan_keeps_a_finite_max_abs_err():
    ref = torch.tensor([1.0, float("nan"), 3.0])
    c = cmp(ref, torch.tensor([1.5, float("nan"), 3.0]))
    assert not c.ok and c.max_abs_err == pytest.approx(0.5)
    assert "where the reference is" not in c.message


def test_nan_in_both_passes():
    ref = torch.tensor([1.0, float("nan"), 3.0])
    c = cmp(ref, ref.clone())
    assert c.ok
    assert c.max_abs_err == 0.0


def test_matching_infinities_pass():
    ref = torch.tensor([float("inf"), -float("inf"), 2.0])
    assert cmp(ref, ref.clone()).ok


@pytest.mark.parametrize("got", [0.0, -float("inf")], ids=["finite", "opposite-sign"])
def test_infinite_reference_needs_the_same_infinity(got):
    ref = torch.tensor([float("inf"), 2.0])
    assert not cmp(ref, torch.tensor([got, 2.0])).ok


def test_nan_in_reference_only_fails():
    ref = torch.tensor([1.0, float("nan")])
    assert not cmp(ref, torch.tensor([1.0, 0.0])).ok


def test_bf16_tolerance():
    ref = torch.randn(32, 32).to(torch.bfloat16)
    # One bf16 ulp (2**-7 relative) off everywhere: within 1e-2 + 1e-2 * |ref|.
    one_ulp = (ref.float() * (1 + 2**-7)).to(torch.bfloat16)
    assert cmp(ref, one_ulp).ok
    assert not cmp(ref, (ref.float() + 0.5).to(torch.bfloat16)).ok
    # The same difference in float32 is out of tolerance.
    assert not cmp(ref.float(), one_ulp.float()).ok


def test_worst_index_formatting():
    ref = torch.zeros(2, 3, 4)
    got = ref.clone()
    got[0, 0, 1] = 1.0  # the first mismatch
    got[1, 2, 3] = 5.0  # the worst
    c = cmp(ref, got)
    assert not c.ok
    assert "2 of 24 elements (8.33%) out of tolerance (atol=0.0001, rtol=0.0001)" in c.message
    assert "max abs err 5" in c.message
    assert "worst at [1, 2, 3]: expected 0, got 5" in c.message
    assert "first mismatch at [0, 0, 1]" in c.message
    assert "mismatches in 2 of 2 slices along dim 0 (indices 0..1)" in c.message
    assert "2 of 4 positions along the last dim (indices 1..3)" in c.message
    assert c.max_abs_err == pytest.approx(5.0)
    assert c.mismatched == pytest.approx(2 / 24)  # the evaluation's weights hint reads it


def test_one_dim_hint_and_all_zeros():
    ref = torch.ones(100)
    got = torch.zeros(100)
    c = cmp(ref, got)
    assert not c.ok
    assert "the output is all zeros" in c.message
    assert "mismatching positions 0..99 of 100" in c.message


def test_zero_dim_tensor():
    assert cmp(torch.tensor(1.5), torch.tensor(1.5)).ok
    c = cmp(torch.tensor(1.0), torch.tensor(2.0))
    assert not c.ok
    assert "worst at []: expected 1, got 2" in c.message


def test_empty_tensors_pass():
    assert cmp(torch.zeros(0, 7), torch.zeros(0, 7)).ok


def test_integers_compare_exactly():
    ref = torch.arange(12, dtype=torch.int64).reshape(3, 4)
    assert cmp(ref, ref.clone()).ok
    got = ref.clone()
    got[1, 1] += 1
    c = cmp(ref, got)
    assert not c.ok
    assert "(atol=0, rtol=0)" in c.message
    assert "worst at [1, 1]: expected 5, got 6" in c.message


def test_bools_compare_exactly():
    ref = torch.tensor([True, False, True])
    assert cmp(ref, ref.clone()).ok
    assert not cmp(ref, torch.tensor([True, True, True])).ok


@pytest.mark.parametrize("dtype, value", [(torch.int32, 2**24 + 1), (torch.int64, 2**40 + 1)])
def test_large_integers_compare_exactly(dtype, value):
    ref = torch.tensor([value], dtype=dtype)
    assert not cmp(ref, ref - 1).ok


# -- compare_outputs / flatten_outputs ---------------------------------------------------------


def test_flatten_outputs():
    a, b, c = torch.zeros(1), torch.ones(2), torch.ones(3)
    leaves = flatten_outputs((a, [b, (c, None)], 3))
    assert len(leaves) == 5
    assert leaves[0] is a and leaves[1] is b and leaves[2] is c and leaves[3] is None and leaves[4] == 3
    assert flatten_outputs(a) == [a]


def test_compare_outputs_count_mismatch():
    c = compare_outputs([torch.zeros(2), torch.zeros(2)], [torch.zeros(2)], None, None)
    assert not c.ok
    assert c.message == "forward returned 1 outputs but the reference returns 2"


def test_compare_outputs_labels_the_failing_leaf():
    ref = [torch.zeros(3), torch.ones(3)]
    got = [torch.zeros(3), torch.zeros(3)]
    c = compare_outputs(ref, got, None, None)
    assert not c.ok
    assert c.message.startswith("output 1: 3 of 3 elements")


def test_compare_outputs_uses_each_leafs_dtype_tolerance():
    ref = [torch.ones(4, dtype=torch.bfloat16), torch.ones(4)]
    got = [torch.full((4,), 1.0078125, dtype=torch.bfloat16), torch.ones(4)]  # 1 + 2**-7
    c = compare_outputs(ref, got, None, None)
    assert c.ok
    assert c.max_abs_err == pytest.approx(2**-7)


def test_compare_outputs_explicit_tolerance_wins():
    ref, got = [torch.ones(4)], [torch.full((4,), 1.001)]
    assert not compare_outputs(ref, got, None, None).ok
    assert compare_outputs(ref, got, 1e-2, 0.0).ok


def test_compare_outputs_non_tensor_leaves():
    assert compare_outputs([3, None], [3, None], None, None).ok
    c = compare_outputs([3], [4], None, None)
    assert not c.ok and c.message == "output: 4 but expected 3"
    c = compare_outputs([torch.zeros(2)], [[0.0, 0.0]], None, None)
    assert not c.ok and c.message == "output: got list, expected a tensor"


def test_max_errors_reported_on_success():
    ref = torch.tensor([1.0, 2.0, 4.0])
    got = torch.tensor([1.0, 2.0, 4.0 + 2e-4])
    c = compare_outputs([ref], [got], None, None)
    assert c.ok
    assert math.isclose(c.max_abs_err, 2e-4, rel_tol=1e-2)
    assert math.isclose(c.max_rel_err, 5e-5, rel_tol=1e-2)


def test_the_precision_rule_gives_a_second_look_only_to_what_is_closer_to_float64():
    """Issue 41: beyond the flat tolerance, an output whose error against a float64 run is within 4x the
    eager reference's own is correct; a low-precision one, a NaN, or a wrong element is not."""
    import torch

    from kernelsmith.evaluate.checks import compare_outputs, within_reference_error

    torch.manual_seed(0)
    x = torch.randn(64, 256)

    def steps(t):
        for _ in range(16):
            t = t * 1.01 + 0.01
        return t

    eager, exact = steps(x.bfloat16()), steps(x.double())
    fused = steps(x.float()).bfloat16()  # rounds once
    assert not compare_outputs([eager], [fused], None, None).ok  # the flat rule alone: "incorrect"
    c = compare_outputs([eager], [fused], None, None, precise=lambda: [exact])
    assert c.ok and "within 4x, so correct" in (c.message or "")
    wrong = fused.clone()
    wrong[3, 7] += 4.0  # one element really off
    c = compare_outputs([eager], [wrong], None, None, precise=lambda: [exact])
    assert not c.ok and "more than 4x" in (c.message or "")
    nan = fused.clone()
    nan[0, 0] = float("nan")
    assert not within_reference_error(eager, nan, exact)[0]
    assert not compare_outputs([eager], [wrong], None, None, precise=lambda: None).ok  # no float64 run: flat rule
    eager32, exact32 = steps(x), steps(x.double())
    low = steps(x.bfloat16().float())  # float32 task, bf16 inputs on purpose
    assert not compare_outputs([eager32], [low], None, None, precise=lambda: [exact32]).ok
