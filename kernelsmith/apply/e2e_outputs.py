"""Whether the patched model's outputs are right, judged as the verdict judges a kernel (docs/verdict.md,
"The precision rule"): against the model's own rounding in the same mode, never by a flat tolerance alone.

The original model run the same way (eager, compiled, CUDA graphs) is the comparison; a higher-precision
run of the model (yardstick.py) is the yardstick. An output passes
- by the flat tolerance: within the verdict's tolerance for its dtype of the original's (a model whose
  rounding is already within it is fine), or
- by the model's own error: its error against the yardstick is at most OWN_ERROR_MULTIPLE times the
  original's own error there, by the largest element and by the L2 norm alike. The original's error is
  floored at the yardstick's own rounding to the output's dtype (no output in that dtype can be closer),
  so that an original bit-exact with the rounded yardstick does not make every other rounding wrong.
At bf16, torch.compile's logits differ from eager's by more than any flat tolerance a kernel could meet
(the Llama example on an H100: 27.4% of elements beyond atol=rtol=0.01), while both are about as far from
the yardstick; a kernel off by 1e-3 where the model's own error is 1e-6 is hundreds of times past it.
Where no yardstick could run, the flat tolerance decides alone, and the result says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from kernelsmith.evaluate.checks import compare_tensor, tolerances
from kernelsmith.evaluate.elementwise import errors_against

# How far the patched model may be from the yardstick, in multiples of the original's own distance. A
# patch changes the rounding of its regions only; the rest of the model rounds as before, so an honest
# kernel leaves the error near the original's (a fused kernel that rounds once, nearer). 4x is the
# verdict's PRECISION_MULTIPLE, on purpose: a kernel is held to one rule in its task and in its model; it
# leaves room for the largest element's chance (the worst of many roundings moves between two runs),
# while a wrong kernel, whose error is its own and not rounding, is orders of magnitude past it.
OWN_ERROR_MULTIPLE = 4.0

FLAT = "flat tolerance"
OWN = "own error"


@dataclass
class OwnError:
    """One output's errors against the yardstick (max abs over elements, and L2): the patched model's,
    the original's in the same mode, and the floor (the yardstick rounded to the output's dtype)."""

    yardstick: str  # its dtype: "float64" (or "float32")
    patched_max: float
    patched_l2: float
    original_max: float
    original_l2: float
    floor_max: float
    floor_l2: float
    multiple: float = OWN_ERROR_MULTIPLE
    ratio: float = field(init=False)  # the patched error over the original's (floored), the larger of max and L2
    within: bool = field(init=False)  # ratio <= multiple

    def __post_init__(self):
        pairs = (
            (self.patched_max, max(self.original_max, self.floor_max)),
            (self.patched_l2, max(self.original_l2, self.floor_l2)),
        )
        self.ratio = max((p / o if o > 0 else (0.0 if p == 0 else float("inf"))) for p, o in pairs)
        self.within = self.ratio <= self.multiple

    def said(self, whose: str, judged: bool = True) -> str:
        """The numbers; `judged`: and the rule's verdict on them."""
        said = (
            f"against a {self.yardstick} run of the model its error is max {self.patched_max:.3g} (L2 "
            f"{self.patched_l2:.3g}), {whose} own max {self.original_max:.3g} (L2 {self.original_l2:.3g})"
        )
        if self.floor_max > self.original_max or self.floor_l2 > self.original_l2:
            said += f", floored at its dtype's rounding max {self.floor_max:.3g} (L2 {self.floor_l2:.3g})"
        if not judged:
            return said
        return (
            said
            + f": {self.ratio:.3g}x, "
            + (f"within {self.multiple:g}x" if self.within else f"more than {self.multiple:g}x")
        )


@dataclass
class Outputs:
    """The outputs' verdict over every trial and tensor."""

    ok: bool
    rule: str  # the rule that decided: FLAT (passed within it, or failed with no yardstick) or OWN
    said: str  # one line: the rule and its numbers
    mismatch: str | None  # why they fail (None: they pass)
    max_abs_err: float  # the patched outputs against the original's, the worst element
    own_error: OwnError | None  # the deciding (or else the worst) output's errors against the yardstick


def own_error(ref: torch.Tensor, got: torch.Tensor, precise: torch.Tensor, yardstick: str) -> OwnError | None:
    """The errors of `got` and `ref` against `precise` (None: not comparable)."""
    if precise.shape != ref.shape or not bool(torch.isfinite(precise).all()):
        return None
    if ref.is_complex():
        ref, got, precise = torch.view_as_real(ref), torch.view_as_real(got), torch.view_as_real(precise)
    # The floor: the yardstick itself rounded to the output's dtype; no output in that dtype is closer.
    floor = errors_against(precise.to(ref.dtype), precise)
    return OwnError(yardstick, *errors_against(got, precise), *errors_against(ref, precise), *floor)


def judge(
    refs: list[list[torch.Tensor]],
    gots: list[list[torch.Tensor]],
    precise: list[list[torch.Tensor]] | None,
    yardstick: str | None,
    whose: str,
    atol: float | None = None,
    rtol: float | None = None,
    no_yardstick: str | None = None,
) -> Outputs:
    """Every trial's outputs: the original's `refs`, the patched model's `gots`, the yardstick's `precise`
    (None: none ran, `no_yardstick` says why). `whose`: the original as the result names it ("the model's",
    "the compiled model's")."""
    worst_abs = 0.0
    worst_own: OwnError | None = None  # over every output, for the numbers
    decided: OwnError | None = None  # over the outputs beyond the flat tolerance that the own error passed
    for t, (ref_l, got_l) in enumerate(zip(refs, gots)):
        if len(ref_l) != len(got_l):
            message = f"the patched model returned {len(got_l)} tensors, the model {len(ref_l)}"
            return Outputs(False, FLAT, message, message, float("inf"), None)
        for k, (r, g) in enumerate(zip(ref_l, got_l)):
            c = compare_tensor(r.detach(), g.detach(), *tolerances(r.dtype, atol, rtol), f"output tensor {k}")
            worst_abs = max(worst_abs, c.max_abs_err if c.max_abs_err is not None else float("inf"))
            leaves = precise[t] if precise is not None and t < len(precise) else []
            own = None
            if r.is_floating_point() and c.max_abs_err is not None and k < len(leaves) and yardstick:
                own = own_error(r.detach(), g.detach(), leaves[k], yardstick)
            if own is not None and (worst_own is None or own.ratio > worst_own.ratio):
                worst_own = own
            if c.ok:
                continue
            if own is not None and own.within:
                decided = own if decided is None or own.ratio > decided.ratio else decided
                continue
            if own is not None:
                message = f"{c.message}; {own.said(whose)}"
                return Outputs(False, OWN, message, message, worst_abs, own)
            why = no_yardstick or "the output cannot be compared with it"
            message = f"{c.message}; no higher-precision run to judge it by ({why}): the flat tolerance decides"
            return Outputs(False, FLAT, message, message, worst_abs, None)
    if decided is not None:
        said = (
            f"by the model's own error, beyond the flat tolerance (max abs err {worst_abs:.3g}): {decided.said(whose)}"
        )
        return Outputs(True, OWN, said, None, worst_abs, decided)
    said = f"within the flat tolerance (max abs err {worst_abs:.3g})"
    if worst_own is not None:
        said += f"; {worst_own.said(whose, judged=False)}"
    elif no_yardstick:
        said += f"; no higher-precision run ({no_yardstick})"
    return Outputs(True, FLAT, said, None, worst_abs, worst_own)
