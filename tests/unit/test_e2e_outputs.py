"""The end-to-end check's rule for outputs (kernelsmith/apply/e2e_outputs.py): the flat tolerance, or the
patched model's error against a higher-precision run within OWN_ERROR_MULTIPLE of the original's own."""

from __future__ import annotations

import torch

from kernelsmith.apply.e2e_outputs import FLAT, OWN, OWN_ERROR_MULTIPLE, judge


def _exact(seed: int = 0, scale: float = 4.0) -> torch.Tensor:
    """A float64 'yardstick' output, logits-like (std `scale`, so that a bf16 ulp exceeds atol)."""
    return torch.randn(64, 64, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)) * scale


def _rounded_after(p: torch.Tensor, noise: float, seed: int, dtype=torch.bfloat16) -> torch.Tensor:
    """p computed another way: an error of spread `noise` (the rounding of the ops before, carried to the
    output) before the output is rounded to `dtype`."""
    wobble = torch.randn(p.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    return (p + noise * wobble).to(dtype)


def test_a_model_within_the_flat_tolerance_passes_by_it_and_the_numbers_are_given():
    p = _exact()
    ref = p.to(torch.float32)
    got = (p + 1e-6).to(torch.float32)
    done = judge([[ref]], [[got]], [[p]], "float64", "the model's")
    assert done.ok and done.rule == FLAT and done.mismatch is None
    assert done.said.startswith("within the flat tolerance (max abs err ")
    assert "against a float64 run of the model its error is max" in done.said and done.own_error is not None


def test_bf16_rounding_beyond_the_flat_tolerance_passes_by_the_models_own_error():
    """Two bf16 computations of the same logits (as eager and torch.compile round) differ beyond
    atol=rtol=0.01 at many elements, while each is about as far from the float64 run."""
    p = _exact()
    ref, got = _rounded_after(p, 0.02, 1), _rounded_after(p, 0.02, 2)
    beyond = ((got.double() - ref.double()).abs() > 0.01 + 0.01 * ref.double().abs()).float().mean()
    assert beyond > 0.05  # the flat tolerance alone would fail it
    done = judge([[ref]], [[got]], [[p]], "float64", "the compiled model's")
    assert done.ok and done.rule == OWN and done.mismatch is None, done.said
    own = done.own_error
    assert own is not None and own.multiple == OWN_ERROR_MULTIPLE and own.ratio <= OWN_ERROR_MULTIPLE
    assert done.said.startswith("by the model's own error, beyond the flat tolerance (max abs err")
    assert f"the compiled model's own max {own.original_max:.3g} (L2 {own.original_l2:.3g})" in done.said
    assert f"within {OWN_ERROR_MULTIPLE:g}x" in done.said


def test_a_wrong_bf16_output_fails_by_the_models_own_error():
    p = _exact()
    ref, got = _rounded_after(p, 0.02, 1), (p * 1.05).to(torch.bfloat16)
    done = judge([[ref]], [[got]], [[p]], "float64", "the model's")
    assert not done.ok and done.rule == OWN and done.own_error is not None and done.own_error.ratio > 8
    assert "out of tolerance" in (done.mismatch or "") and f"more than {OWN_ERROR_MULTIPLE:g}x" in (done.mismatch or "")


def test_an_output_off_by_1e_3_fails_where_the_models_own_error_is_1e_6():
    """float32: the model's rounding ~1e-7 relative; a kernel off by 1e-3 relative is thousands of times
    past it, even with a flat tolerance loose enough to let it through elementwise on most elements."""
    p = _exact(scale=1.0)
    ref = p.to(torch.float32)
    got = (p * (1 + 1e-3)).to(torch.float32)
    done = judge([[ref]], [[got]], [[p]], "float64", "the model's", atol=1e-4, rtol=1e-4)
    assert not done.ok and done.rule == OWN and done.own_error is not None
    assert done.own_error.original_max < 1e-6 and done.own_error.ratio > 1000


def test_an_original_bit_exact_with_the_rounded_yardstick_is_floored_at_the_dtypes_rounding():
    """The original equals the yardstick rounded to bf16 (its error is the least any bf16 output has): a
    patched output that rounds the other way at a few elements passes; one off by much more fails."""
    p = _exact()
    ref = p.to(torch.bfloat16)
    got = ref.clone()
    got.view(-1)[:8] = torch.nextafter(ref.view(-1)[:8], torch.full((8,), 1e9, dtype=torch.bfloat16))
    done = judge([[ref]], [[got]], [[p]], "float64", "the model's", atol=0.0, rtol=0.0)
    assert done.ok and done.rule == OWN, done.said
    off = ref.clone()
    off.view(-1)[:8] = (ref.view(-1)[:8].double() + 1.0).to(torch.bfloat16)
    done = judge([[ref]], [[off]], [[p]], "float64", "the model's", atol=0.0, rtol=0.0)
    assert not done.ok and done.rule == OWN


def test_without_a_yardstick_the_flat_tolerance_decides_and_says_so():
    p = _exact()
    ref, got = _rounded_after(p, 0.02, 1), _rounded_after(p, 0.02, 2)
    done = judge([[ref]], [[got]], None, None, "the model's", no_yardstick="the model could not run in float64")
    assert not done.ok and done.rule == FLAT and done.own_error is None
    assert (
        "no higher-precision run to judge it by (the model could not run in float64): the flat tolerance decides"
        in (done.mismatch or "")
    )
    close = judge([[ref]], [[ref]], None, None, "the model's", no_yardstick="none was made")
    assert close.ok and close.rule == FLAT and close.said.endswith("; no higher-precision run (none was made)")


def test_integer_outputs_compare_exactly_and_a_count_mismatch_fails():
    ids = torch.arange(10)
    assert judge([[ids]], [[ids.clone()]], [[ids]], "float64", "the model's").ok
    done = judge([[ids]], [[ids + 1]], [[ids]], "float64", "the model's")
    assert not done.ok and done.rule == FLAT
    done = judge([[ids, ids]], [[ids]], None, None, "the model's")
    assert not done.ok and done.mismatch == "the patched model returned 1 tensors, the model 2"
