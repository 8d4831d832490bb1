"""The ModelNew of a fused GEMV seed: a task's GEMMs (one activation, one or more weights) with what the task
holds beside them, read from its forward's terms (terms.py) and launched as gemv_kernels.py's kernels:

    prologue   residual add and/or RMSNorm, or SiLU-mul, of the GEMM's input: _rows_kernel, once per row
    GEMMs      one _gemv_kernel over the weights concatenated once (derive_weights), its outputs split after
    epilogue   silu(gemm) * e, silu(e) * gemm, e + gemm, or silu(gate) * up of a merged gate + up, in the GEMV
               (or in _combine_kernel after SPLIT_K partials); an RMSNorm after the residual add: _rows_kernel

Launch constants the tuner searches: BLOCK_N, BLOCK_K, SPLIT_K (bound once in forward, the grid reads them),
BLOCK_M (computed from the rows: 1, or at least 16 for tl.dot), each _rows_kernel's BLOCK_SIZE, num_warps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kernelsmith.seed.fused.terms import Forward, Term

EPI_CODES = {None: 0, "silu_acc_mul": 1, "silu_e_mul": 2, "add": 3}
Pre = tuple[Term, Term | None, str | None, float, bool]  # (x, r, norm weight, eps, silu)


@dataclass
class Plan:
    weights: list[str]  # the GEMMs' weights, in the merged weight's order
    act: Term  # the GEMMs' activation
    pre: Pre | None = None
    epi: str | None = None  # the epilogue's kind (EPI_CODES)
    e: Term | None = None  # the epilogue's other tensor
    gated: bool = False
    post: tuple[str, float] | None = None  # (norm weight, eps) of an RMSNorm after the epilogue
    outputs: list[str] = field(default_factory=list)  # each output as the glue's tensor


def _inputish(t: Term) -> bool:
    return t[0] == "in" or (t[0] == "T" and _inputish(t[1]))


def code_of(t: Term) -> str:
    """An input term as code over the forward's arguments."""
    return t[1] if t[0] == "in" else f"{code_of(t[1])}.transpose({t[2]}, {t[3]})"


def _prologue(act: Term) -> tuple[bool, Pre | None]:
    """(whether these kernels compute the GEMMs' activation, its prologue: None where it is an input)."""
    if _inputish(act):
        return True, None
    if act[0] == "norm":
        x = act[1]
        if _inputish(x):
            return True, (x, None, act[2], act[3], False)
        if x[0] == "add" and _inputish(x[1]) and _inputish(x[2]):
            return True, (x[1], x[2], act[2], act[3], False)
    if act[0] == "silumul" and _inputish(act[1]) and _inputish(act[2]):
        return True, (act[1], act[2], None, 0.0, True)
    return False, None


def _epilogue(plan: Plan, term: Term, mms: list[Term]) -> str | None:
    """The glue's tensor for an epilogue output, setting the plan's epilogue; None where it is not one."""
    kind, e, gated, post = None, None, False, None
    if term[0] == "norm" and term[1][0] == "add":
        post, term = (term[2], term[3]), term[1]
    if term[0] == "silumul" and len(mms) == 2 and (term[1], term[2]) in ((mms[0], mms[1]), (mms[1], mms[0])):
        gated = True
        plan.weights = [term[1][2], term[2][2]]
    elif len(mms) == 1 and term[0] == "silumul" and term[1] == mms[0] and _inputish(term[2]):
        kind, e = "silu_acc_mul", term[2]
    elif len(mms) == 1 and term[0] == "silumul" and term[2] == mms[0] and _inputish(term[1]):
        kind, e = "silu_e_mul", term[1]
    elif (
        len(mms) == 1
        and term[0] == "add"
        and mms[0] in term[1:]
        and _inputish(term[1] if term[2] == mms[0] else term[2])
    ):
        kind, e = "add", term[1] if term[2] == mms[0] else term[2]
    else:
        return None
    if plan.outputs and any(o.startswith("outs[") for o in plan.outputs):
        return None
    if (plan.epi, plan.e, plan.gated) not in ((None, None, False), (kind, e, gated)):
        return None
    plan.epi, plan.e, plan.gated = kind, e, gated
    if post is not None:
        if plan.post not in (None, post):
            return None
        plan.post = post
        return "y2"
    return "out"


def plan_of(fwd: Forward) -> Plan | None:
    """What the task's forward asks of the kernels, or None where it is not a GEMV with these prologues and
    epilogues."""
    mms = [t for t in fwd.order if t[0] == "mm"]
    if not mms or any(t[1] != mms[0][1] for t in mms):
        return None
    plan = Plan([t[2] for t in mms], mms[0][1])
    known, pre = _prologue(plan.act)
    if not known:
        return None
    plan.pre = pre
    for term in fwd.outputs:
        if term in mms:
            if plan.epi is not None or plan.gated:
                return None
            plan.outputs.append(f"outs[{mms.index(term)}]")
        elif pre is not None and pre[1] is not None and term == ("add", pre[0], pre[1]):
            plan.outputs.append("h")
        elif pre is not None and term == plan.act:
            plan.outputs.append("a")
        else:
            said = _epilogue(plan, term, mms)
            if said is None:
                return None
            plan.outputs.append(said)
    return plan


def _pow2(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


@dataclass
class Sizes:
    n: int  # the GEMV's output width (of one of gate and up, when merged)
    k: int

    def blocks(self) -> tuple[int, int, int]:
        """Starting BLOCK_N, BLOCK_K, SPLIT_K: blocks of a GEMV's usual size, K split until about two waves of
        programs fill a large card (the tuner goes on from these)."""
        block_n, block_k = min(64, max(16, _pow2(self.n))), min(128, max(16, _pow2(self.k)))
        split, programs = 1, -(-self.n // block_n)
        while programs * split < 264 and split < 8 and self.k // (2 * split) >= 4 * block_k:
            split *= 2
        return block_n, block_k, split


def sizes(source: str, plan: Plan) -> Sizes | None:
    """The GEMV's N and K from the task's header lines (`self.W: float32[N, K] ...`)."""
    shapes = []
    for w in plan.weights:
        found = re.search(rf"^self\.{re.escape(w)}: \w+\[(\d+), (\d+)\]", source, re.M)
        if found is None:
            return None
        shapes.append((int(found[1]), int(found[2])))
    if len({k for _, k in shapes}) != 1:
        return None
    n = shapes[0][0] if plan.gated else sum(n for n, _ in shapes)
    return Sizes(n, shapes[0][1])


MODEL_NEW = '''

class ModelNew(Model):
    """The region's GEMMs as one GEMV over their merged weight, with its prologue and epilogue (kernelsmith's
    fused seed)."""

    def __init__(self, *args):
        super().__init__(*args)
        self.derive_weights()

    def derive_weights(self):
        self.merged_weight = {merged}

    def forward(self, {args}):
        w = self.merged_weight
        k = w.shape[1]
{pre}        a = {act}.reshape(-1, k).contiguous()
        m = a.shape[0]
        n = {n}
        out = torch.empty(m, n, dtype=a.dtype, device=a.device)
        e = {e}
        BLOCK_M = 1 if m == 1 else max(16, triton.next_power_of_2(m))
        BLOCK_N, BLOCK_K, SPLIT_K = {block_n}, {block_k}, {split_k}
        part = torch.empty(SPLIT_K, m, {width}, dtype=torch.float32, device=a.device) if SPLIT_K > 1 else out
        grid = (triton.cdiv(n, BLOCK_N), triton.cdiv(m, BLOCK_M), SPLIT_K)
        _gemv_kernel[grid](a, w, e, out, part, m, n, k, EPI={epi}, GATED={gated}, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                           BLOCK_K=BLOCK_K, SPLIT_K=SPLIT_K, num_warps=4)
        if SPLIT_K > 1:
            _combine_kernel[(triton.cdiv(n, BLOCK_N), m)](part, e, out, m, n, EPI={epi}, GATED={gated},
                                                          SPLIT_K=SPLIT_K, BLOCK_N=BLOCK_N, num_warps=4)
{post}{split}        return {outputs}
'''

PRE = '''        x = {x}.reshape(-1, k).contiguous()
        r = {r}
        h = {h}
        a = torch.empty_like(x)
        _rows_kernel[(x.shape[0],)](x, r, {nw}, h, a, k, {eps}, HAS_ADD={add}, NORM={norm}, SILU={silu},
                                    BLOCK_SIZE={block}, num_warps=4)
'''

POST = '''        y2 = torch.empty_like(out)
        _rows_kernel[(m,)](out, out, self.{nw}, out, y2, n, {eps}, HAS_ADD=False, NORM=True, SILU=False,
                           BLOCK_SIZE={block}, num_warps=4)
'''


def _pre_code(plan: Plan, k: int) -> tuple[str, str]:
    """The prologue's code and the GEMV's activation after it."""
    if plan.pre is None:
        return "", code_of(plan.act)
    x, r, nw, eps, silu = plan.pre
    code = PRE.format(
        x=code_of(x),
        r=f"{code_of(r)}.reshape(-1, k).contiguous()" if r is not None else "x",
        h="torch.empty_like(x)" if r is not None and not silu else "x",
        nw=f"self.{nw}" if nw is not None else "x",
        eps=eps,
        add=r is not None and not silu,
        norm=nw is not None,
        silu=silu,
        block=min(1024, max(16, _pow2(k))),
    )
    return code, "a"


def model_new(fwd: Forward, plan: Plan, size: Sizes) -> str | None:
    """The ModelNew source for a plan (appended after the task's source and gemv_kernels.py's); None where an
    output's rank is not 2 or 3, or one of rank 3 has no input of rank 3 to take its leading sizes from."""
    pre, act = _pre_code(plan, size.k)
    block_n, block_k, split_k = size.blocks()
    weights = [f"self.{w}" for w in plan.weights]
    merged = f"{weights[0]}.contiguous()" if len(weights) == 1 else f"torch.cat([{', '.join(weights)}]).contiguous()"
    split = ""
    if any(o.startswith("outs[") for o in plan.outputs):
        split = f"        outs = out.split([{', '.join(f'{w}.shape[0]' for w in weights)}], dim=1)\n"
    post = ""
    if plan.post is not None:
        post = POST.format(nw=plan.post[0], eps=plan.post[1], block=min(1024, max(16, _pow2(size.n))))
    if any(r not in (2, 3) for r in fwd.ranks) or (3 in fwd.ranks and 3 not in fwd.arg_ranks):
        return None
    lead = ""
    if 3 in fwd.ranks:  # the rows' leading sizes, as the call's rank-3 input has them
        lead = f"        lead = next(t.shape[:-1] for t in ({', '.join(fwd.args)},) if t.dim() == 3)\n"
    outputs = [f"{o}.view(m, -1)" if r == 2 else f"{o}.view(*lead, -1)" for o, r in zip(plan.outputs, fwd.ranks)]
    return MODEL_NEW.format(
        merged=merged,
        args=", ".join(fwd.args),
        pre=pre,
        act=act,
        n="w.shape[0] // 2" if plan.gated else "w.shape[0]",
        e=f"{code_of(plan.e)}.reshape(m, n).contiguous()" if plan.e is not None else "out",
        block_n=block_n,
        block_k=block_k,
        split_k=split_k,
        width="2 * n" if plan.gated else "n",
        epi=EPI_CODES[plan.epi],
        gated=plan.gated,
        post=post,
        split=split + lead,
        outputs=", ".join(outputs) if len(outputs) > 1 else outputs[0],
    )
