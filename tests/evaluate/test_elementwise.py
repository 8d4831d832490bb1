"""The comparison a piece at a time says exactly what it says over the whole output."""

from __future__ import annotations

import pytest
import torch

from kernelsmith.evaluate import checks, elementwise


def _cases():
    g = torch.Generator().manual_seed(0)
    ref = torch.randn(37, 5, 11, generator=g)
    got = ref.clone()
    got[3, 1, 4] += 1.0
    got[30, 4, 10] = float("nan")
    got[12, 0, 0] -= 0.5
    yield "3-d with a NaN", ref, got
    ref1 = torch.randn(1001, generator=g)
    got1 = ref1.clone()
    got1[17] = float("inf")
    got1[900] += 3.0
    yield "1-d", ref1, got1
    refi = torch.randint(0, 9, (64, 33), generator=g)
    goti = refi.clone()
    goti[40, 32] += 1
    yield "integers", refi, goti
    refb = torch.randn(8, 300, generator=g).to(torch.bfloat16)
    yield "bf16 all close", refb, refb.clone()
    yield "all zeros", ref, torch.zeros_like(ref)
    refn = ref.clone()
    refn[0, 0, 0] = float("inf")
    yield "inf in the reference", refn, got
    refc = torch.randn(10, 7, dtype=torch.complex64, generator=g)
    gotc = refc.clone()
    gotc[9, 6] += 1j
    yield "complex", refc, gotc


@pytest.mark.parametrize("piece", [1, 7, 64, 1000])
def test_pieces_agree_with_one_piece(monkeypatch, piece):
    whole = {name: checks.compare_tensor(r, g, 1e-4, 1e-4, "output") for name, r, g in _cases()}
    whole_l2 = {name: checks.relative_l2(r, g) for name, r, g in _cases()}
    monkeypatch.setattr(elementwise, "PIECE", piece)
    for name, r, g in _cases():
        got = checks.compare_tensor(r, g, 1e-4, 1e-4, "output")
        want = whole[name]
        assert (got.ok, got.message, got.mismatched) == (want.ok, want.message, want.mismatched), name
        assert str(got.max_abs_err) == str(want.max_abs_err) and str(got.max_rel_err) == str(want.max_rel_err), name
        if want.err_l2:
            assert got.err_l2 == pytest.approx(want.err_l2, rel=1e-5), name
        assert checks.relative_l2(r, g) == pytest.approx(whole_l2[name], rel=1e-5, nan_ok=True), name


def test_the_message_names_what_the_whole_output_holds(monkeypatch):
    monkeypatch.setattr(elementwise, "PIECE", 5)
    ref = torch.zeros(6, 4)
    got = ref.clone()
    got[1, 2] = 2.0
    got[5, 0] = float("nan")
    c = checks.compare_tensor(ref, got, 1e-4, 1e-4, "output")
    assert not c.ok
    assert "2 of 24 elements" in c.message
    assert "worst at [5, 0]" in c.message and "first mismatch at [1, 2]" in c.message
    assert "1 element is NaN where the reference is finite" in c.message
    assert "mismatches in 2 of 6 slices along dim 0 (indices 1..5)" in c.message
    assert "2 of 4 positions along the last dim (indices 0..2)" in c.message


def test_a_constant_output_is_still_found_degenerate_without_its_copy(monkeypatch):
    monkeypatch.setattr(elementwise, "PIECE", 16)
    flat = torch.full((50, 40), 1e-6)
    assert checks.is_degenerate([flat], None, None)
    assert not checks.is_degenerate([torch.randn(50, 40)], None, None)


def test_errors_against_a_float64_run_by_piece(monkeypatch):
    x = torch.randn(30, 20)
    p = x.double() + 1e-3 * torch.randn(30, 20, dtype=torch.float64)
    whole = elementwise.errors_against(x, p)
    monkeypatch.setattr(elementwise, "PIECE", 7)
    assert elementwise.errors_against(x, p) == pytest.approx(whole)
    x[4, 4] = float("nan")
    assert elementwise.errors_against(x, p) == (float("inf"), float("inf"))


def test_the_judges_out_of_memory_says_what_and_where():
    from kernelsmith.evaluate.judging import evaluation

    def compare():
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 6.00 GiB. GPU 0 has a total capacity")

    try:
        compare()
    except torch.OutOfMemoryError as exc:
        text = evaluation._out_of_memory(exc)
    assert text.startswith("the judge ran out of GPU memory checking this candidate")
    assert "CUDA out of memory. Tried to allocate 6.00 GiB" in text and "GPU 0 has" not in text
    assert "do not fit this GPU" in text
