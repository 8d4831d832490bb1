"""The one place that decides whether an output matches the reference, and says how not.

The message of a failed check is feedback for whoever wrote the kernel (often an LLM): it
names the output, how many elements are off, the worst one with both values, and where the
mismatches sit (rows/columns), which is usually enough to spot a masking or indexing bug.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from kernelsmith.evaluate import elementwise

# (atol, rtol) by output dtype; an element passes when |got - ref| <= atol + rtol * |ref|.
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-6, 1e-6),
    torch.float32: (1e-4, 1e-4),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (1e-2, 1e-2),
}


def tolerances(dtype: torch.dtype, atol: float | None = None, rtol: float | None = None) -> tuple[float, float]:
    if dtype.is_floating_point or dtype.is_complex:
        base = TOLERANCES.get(dtype, (1e-2, 1e-2))  # fp8 and other narrow types
    else:
        base = (0.0, 0.0)  # integers and bools compare exactly
    return (base[0] if atol is None else atol, base[1] if rtol is None else rtol)


@dataclass
class Comparison:
    ok: bool
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    message: str | None = None
    err_l2: list[float] | None = None  # per output leaf: the L2 norm of (got - ref), finite part
    mismatched: float | None = None  # the share of the failing output's elements out of tolerance


def _fmt_index(flat: int, shape: torch.Size) -> str:
    idx = []
    for dim in reversed(shape):
        idx.append(flat % dim)
        flat //= dim
    return "[" + ", ".join(str(i) for i in reversed(idx)) + "]"


def _elements(n: int) -> str:
    return f"{n} element is" if n == 1 else f"{n} elements are"


def compare_tensor(ref: torch.Tensor, got: torch.Tensor, atol: float, rtol: float, label: str) -> Comparison:
    if got.device != ref.device:  # torch compares no two devices' tensors (judging/leaves.py places them)
        return Comparison(False, message=f"{label} is on {got.device}, the reference's on {ref.device}")
    if got.shape != ref.shape:
        return Comparison(False, message=f"{label}: shape {tuple(got.shape)} but expected {tuple(ref.shape)}")
    if got.dtype != ref.dtype:
        return Comparison(False, message=f"{label}: dtype {got.dtype} but expected {ref.dtype}")
    if ref.numel() == 0:
        return Comparison(True, 0.0, 0.0)
    if ref.is_complex():
        ref, got = torch.view_as_real(ref), torch.view_as_real(got)
    t = elementwise.tally(ref, got, atol, rtol)
    max_abs = t.max_abs if t.any_finite else float("inf")
    if t.nbad == 0:
        return Comparison(True, max_abs, t.max_rel, err_l2=[math.sqrt(t.l2_sq)])
    # A NaN or inf that is out of tolerance is the largest error there is (nan before inf, as
    # torch.max takes it), not one left out of the maximum.
    max_rel = t.max_rel
    if t.bad_nan:
        max_abs = max_rel = float("nan")
    elif t.bad_inf:
        max_abs = max_rel = float("inf")
    n, shape = ref.numel(), ref.shape
    parts = [
        f"{label}: {t.nbad} of {n} elements ({100.0 * t.nbad / n:.3g}%) out of tolerance "
        f"(atol={atol:g}, rtol={rtol:g})",
        f"max abs err {max_abs:.4g}, max rel err {max_rel:.4g}",
        f"worst at {_fmt_index(t.worst, shape)}: expected {t.expected:.6g}, got {t.got:.6g}",
        f"first mismatch at {_fmt_index(t.first, shape)}",
    ]
    parts += [f"{_elements(k)} {what}" for k, what in zip(t.nonfinite, elementwise.NONFINITE) if k]
    if t.all_zero:
        parts.append("the output is all zeros")
    message = "; ".join(parts) + elementwise.where_hint(t, shape, n)
    return Comparison(False, max_abs, max_rel, message, mismatched=t.nbad / n)


def _second_look(c: Comparison, r: torch.Tensor, g: torch.Tensor, i: int, precise: Callable) -> Comparison:
    """The precision rule on one failing leaf (see PRECISION_MULTIPLE); `c` stands when it does not apply."""
    leaves = precise()
    if not leaves or i >= len(leaves) or not isinstance(leaves[i], torch.Tensor):
        return c
    ok, text = within_reference_error(r, g, leaves[i])
    if ok:
        return Comparison(
            True,
            c.max_abs_err,
            c.max_rel_err,
            text,
            err_l2=[elementwise.l2_norms(r, g, torch.float64)[0]],  # all finite: the rule checked
        )
    return Comparison(False, c.max_abs_err, c.max_rel_err, f"{c.message}; {text}", mismatched=c.mismatched)


def flatten_outputs(obj) -> list:
    """A forward's result as a flat list of leaves (tuples and lists opened, in order)."""
    if isinstance(obj, (tuple, list)):
        out: list = []
        for item in obj:
            out += flatten_outputs(item)
        return out
    return [obj]


# -- the output's structure: a tensor, a tuple of two tensors, a list of one ... is part of correctness
_MAX_DEPTH = 8


def output_structure(obj, depth: int = 0):
    """A plain, comparable description of a forward's result: "tensor", "number", "None",
    ["tuple", [...]] / ["list", [...]], or "other:<type>" for anything else (a dict, an object)."""
    if isinstance(obj, torch.Tensor):
        return "tensor"
    if obj is None:
        return "None"
    if isinstance(obj, (bool, int, float)):
        return "number"
    if isinstance(obj, (tuple, list)) and depth < _MAX_DEPTH:
        return [type(obj).__name__, [output_structure(x, depth + 1) for x in obj]]
    return f"other:{type(obj).__name__}"


def plain_structure(s) -> bool:
    """True when every part of the structure crosses to the judge (tensors, numbers, None)."""
    if isinstance(s, list):
        return all(plain_structure(x) for x in s[1])
    return not s.startswith("other:")


def describe_structure(s, depth: int = 0) -> str:
    """'a tensor', 'a tuple of 1 (a tensor)', 'a dict'. `s` may come from a sandbox: anything
    malformed is described as such, never raised."""
    if s == "tensor":
        return "a tensor"
    if s == "number":
        return "a number"
    if s == "None":
        return "None"
    if isinstance(s, str) and s.startswith("other:"):
        return f"a {s[6:][:40]}"
    if (
        isinstance(s, (list, tuple))
        and len(s) == 2
        and s[0] in ("tuple", "list")
        and isinstance(s[1], (list, tuple))
        and depth < _MAX_DEPTH
    ):
        items = s[1]
        inner = ", ".join(describe_structure(x, depth + 1) for x in items[:4]) + (", ..." if len(items) > 4 else "")
        return f"a {s[0]} of {len(items)}" + (f" ({inner})" if items else "")
    return "an output of unknown structure"


def structure_mismatch(ref, got) -> str | None:
    """None when the candidate's output has the reference's structure, else what differs."""

    def plain(x):  # a pickled tuple and a list of the same items compare equal
        return [plain(y) for y in x] if isinstance(x, (list, tuple)) else x

    if plain(ref) == plain(got):
        return None
    return f"forward returned {describe_structure(got)} where the reference returns {describe_structure(ref)}"


def l2_tolerance(rtol: float) -> float:
    return min(0.05, 10.0 * rtol)


def relative_l2(ref: torch.Tensor, got: torch.Tensor) -> float:
    work = torch.float64 if ref.dtype == torch.float64 else torch.float32
    err, denom = elementwise.l2_norms(ref, got, work)
    return err / denom if denom > 0 else err


def _mean_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def is_degenerate(ref_leaves: list, atol: float | None, rtol: float | None) -> bool:
    """True when an all-zero or a constant (the mean) output would pass the elementwise check:
    then the elementwise check alone cannot tell a kernel from no kernel."""
    tensors = [r for r in ref_leaves if isinstance(r, torch.Tensor) and r.is_floating_point() and r.numel()]
    if not tensors:
        return False
    for fill in ("zeros", "mean"):
        fakes = []
        for r in tensors:  # a constant broadcast to the output's shape: no memory of that size
            value = 0.0 if fill == "zeros" else float(r.mean(dtype=_mean_dtype(r.dtype)))
            fakes.append(torch.full((), value, dtype=r.dtype, device=r.device).expand(r.shape))
        if all(compare_tensor(r, f, *tolerances(r.dtype, atol, rtol), "output").ok for r, f in zip(tensors, fakes)):
            return True
    return False


# -- the precision rule: a fused kernel rounds once, the eager reference after every op ---------------
# Beyond the flat tolerance of the eager reference, a floating output is still correct when its error
# against a float64 run of the same Model is at most PRECISION_MULTIPLE times the eager reference's own
# error there, by its largest element and by the L2 norm alike (docs/verdict.md, "Correctness").
PRECISION_MULTIPLE = 4.0


def within_reference_error(ref: torch.Tensor, got: torch.Tensor, precise: torch.Tensor) -> tuple[bool, str]:
    """Whether `got` is as close to `precise` (a float64 run of the reference) as the eager `ref` is,
    within PRECISION_MULTIPLE; and the sentence that says by how much."""
    p = precise
    if p.shape != ref.shape or not bool(torch.isfinite(p).all()):
        return False, "the float64 run of the reference is not comparable (shape or non-finite values)"
    if ref.is_complex():
        ref, got, p = torch.view_as_real(ref), torch.view_as_real(got), torch.view_as_real(p)
    ref_max, ref_l2 = elementwise.errors_against(ref, p)
    got_max, got_l2 = elementwise.errors_against(got, p)
    k = PRECISION_MULTIPLE
    ok = got_max <= k * ref_max and got_l2 <= k * ref_l2 and ref_max > 0
    text = (
        f"against a float64 run of the reference its error is max {got_max:.3g} (L2 {got_l2:.3g}), the eager "
        f"reference's own max {ref_max:.3g} (L2 {ref_l2:.3g}): "
        + (f"within {k:g}x, so correct" if ok else f"more than {k:g}x")
    )
    return ok, text


def compare_outputs(
    ref_leaves: list,
    got_leaves: list,
    atol: float | None,
    rtol: float | None,
    check_l2: bool = False,
    precise: Callable[[], list | None] | None = None,
) -> Comparison:
    """Compare every output leaf; the first failure decides, errors are reported worst-first.
    `check_l2` adds a relative L2 error bound (used on degenerate tasks). `precise()`: the reference's
    outputs from a float64 run (or None), asked for only when a floating leaf is beyond the flat
    tolerance: the precision rule then gives it a second look."""
    if len(ref_leaves) != len(got_leaves):
        return Comparison(
            False, message=f"forward returned {len(got_leaves)} outputs but the reference returns {len(ref_leaves)}"
        )
    max_abs = max_rel = 0.0
    err_l2: list[float] = []
    notes: list[str] = []
    for i, (r, g) in enumerate(zip(ref_leaves, got_leaves)):
        label = "output" if len(ref_leaves) == 1 else f"output {i}"
        if not isinstance(r, torch.Tensor):
            if isinstance(g, torch.Tensor) or r != g:  # a tensor's != is a tensor, not a verdict
                return Comparison(False, message=f"{label}: {g!r} but expected {r!r}")
            continue
        if not isinstance(g, torch.Tensor):
            return Comparison(False, message=f"{label}: got {type(g).__name__}, expected a tensor")
        a, rt = tolerances(r.dtype, atol, rtol)
        c = compare_tensor(r, g, a, rt, label)
        if not c.ok and precise is not None and r.is_floating_point() and g.shape == r.shape and g.dtype == r.dtype:
            c = _second_look(c, r, g, i, precise)
        if not c.ok:
            return c
        if check_l2 and r.is_floating_point():
            err = relative_l2(r, g)
            if not err <= l2_tolerance(rt):
                return Comparison(
                    False,
                    c.max_abs_err,
                    c.max_rel_err,
                    f"{label}: relative L2 error {err:.3g} > {l2_tolerance(rt):g}; on this task an "
                    "all-zero or constant output passes the elementwise tolerance, so the output "
                    "must also match as a whole",
                )
        max_abs = max(max_abs, c.max_abs_err or 0.0)
        max_rel = max(max_rel, c.max_rel_err or 0.0)
        err_l2 += c.err_l2 or [0.0]
        if c.message:  # passed by the precision rule: say how
            notes.append(f"{label}: {c.message}")
    return Comparison(True, max_abs, max_rel, "; ".join(notes) or None, err_l2=err_l2)
