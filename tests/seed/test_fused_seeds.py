"""Our own seeds for the regions capture fuses across the library boundary (issue 57, "Starts for them"): the tiny
Llama decode step captured at batch 1 and 3 (one row: the GEMV's broadcast path; three: its tl.dot path, padded
to 16 rows), each fused GEMV task of ours judged `correct` by the evaluator (Triton's interpreter) as seeded and
at two other launch configurations the tuner writes (K split into partials, blocks smaller and larger than the
rows); then `optimize --fused` starts from them and its patch passes apply's check in eager mode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import REPO

from kernelsmith.capture.run import capture
from kernelsmith.evaluate.options import EvalOptions
from kernelsmith.evaluate.pool import EvalPool
from kernelsmith.evolve.tuner import apply_config, find_params
from kernelsmith.seed.fused import fused_seed
from kernelsmith.task import Task

LLAMA = f"{REPO / 'examples/llama_decode/model.py'}:tiny_decode_step"

# Every fused GEMV region of the Llama step, by what its file name starts with (the kind, then the modules/ops).
OURS = [
    "prologue_llamaforcausallm_llamamodel_mm",  # final norm + LM head
    "prologue_llamamlp_silu_mul_mm",  # SiLU-mul + down projection
    "prologue_siblings_llamadecoderlayer_llamarmsnorm_llamaattention",  # input norm + Q, K, V
    "prologue_siblings_llamamodel_llamadecoderlayer",  # residual add + input norm + Q, K, V (the sum an output)
    "prologue_siblings_llamadecoderlayer_add_llamarmsnorm_llamamlp",  # add + norm + gate, up
    "epilogue_llamamlp_mm_silu_mul",  # gate projection + SiLU * up
    "epilogue_llamamlp_silu_mm_mul",  # up projection * SiLU(gate)
    "epilogue_llamadecoderlayer_llamaattention_add_llamarmsnorm",  # o_proj + residual add + next norm
    "epilogue_llamamodel_llamadecoderlayer_llamarmsnorm",  # down + residual add + final norm
    "siblings_llamaattention_mm",  # Q, K, V
    "siblings_llamamlp_mm",  # gate, up
    "siblings_epilogue_llamamlp_mm_silu_mul",  # gate + up + SiLU-mul, merged
]
# Retuned: a prologue, the norm after the residual add, the gated merge.
RETUNED = [OURS[0], OURS[7], OURS[11]]
CONFIGS = [
    {"BLOCK_N": 16, "BLOCK_K": 16, "SPLIT_K": 4, "BLOCK_SIZE": 16},
    {"BLOCK_N": 128, "BLOCK_K": 32, "SPLIT_K": 2, "BLOCK_SIZE": 32},
]


@pytest.fixture(scope="module")
def cap(tmp_path_factory) -> Path:
    pytest.importorskip("transformers")
    out = tmp_path_factory.mktemp("fused_seeds") / "cap"
    capture(LLAMA, out, forwards=1, shapes=[{"batch": 1}, {"batch": 3}])
    return out


def _tasks(cap: Path) -> dict[str, Path]:
    listed = json.loads((cap / "capture.json").read_text())["tasks"]
    return {t["name"]: cap / t["file"] for t in listed if t["file"] and t["fused"]}


def _retuned(code: str, config: dict[str, int]) -> str:
    keys = {p.key: config[p.key.rsplit(".", 1)[1]] for p in find_params(code, interpreted=True)}
    assert {k.rsplit(".", 1)[1] for k in keys} >= {"BLOCK_N", "BLOCK_K", "SPLIT_K"}, keys
    tuned = apply_config(code, keys, interpreted=True)
    assert tuned != code
    return tuned


def test_each_fused_gemv_task_has_our_seed_correct_at_three_launch_configurations(cap, tmp_path):
    tasks = _tasks(cap)
    seeds = {name: fused_seed(path) for name, path in tasks.items()}
    have = {name for name, code in seeds.items() if code is not None}
    for prefix in OURS:
        assert any(name.startswith(prefix) for name in have), (prefix, sorted(have))
    # Attention and the projections with their rotary embedding are not GEMVs with these prologues/epilogues.
    assert not any(name.startswith("attention_") or "neg_cat" in name for name in have), sorted(have)
    jobs = []
    options = EvalOptions(device="cpu", timeout=120, trials=2)
    with EvalPool(device="cpu", workers=1, options=options) as pool:  # queued: each loaded ahead of its turn
        for name in sorted(have):
            code = seeds[name]
            assert code is not None
            variants = [code] + [_retuned(code, c) for c in CONFIGS if any(name.startswith(r) for r in RETUNED)]
            jobs += [(name, k, pool.submit(Task.from_file(tasks[name]), v)) for k, v in enumerate(variants)]
        results = [(name, k, f.result()) for name, k, f in jobs]
    assert len(results) == len(have) + 2 * len(RETUNED)
    for name, k, r in results:
        assert r.status == "correct", (name, k, r.status, r.error)


def test_optimize_fused_starts_from_our_seeds_and_its_patch_passes_in_eager_mode(tmp_path, monkeypatch):
    from kernelsmith.optimize import OptimizeOptions, optimize
    from kernelsmith.optimize.starts import OUR_FUSED_SEED

    pytest.importorskip("transformers")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    opts = OptimizeOptions(
        entry=LLAMA,
        out=tmp_path / "work",
        device="cpu",
        fused=True,
        iterations=0,  # each region's start, judged: the patch takes the seeds as written
        budget_s=60,
        top=10,  # the heaviest are attention's (no seed of ours) or not, by the host's timing: enough to hold some
        modes=("eager",),
        forwards=1,
    )
    done = optimize(opts, lambda _: None)
    assert done.passed, done.reason
    seeds = tmp_path / "work" / "seeds"
    ours = [p.stem for p in seeds.glob("*.txt") if p.read_text().strip() == OUR_FUSED_SEED]
    assert ours, sorted(p.name for p in seeds.iterdir())
    patched = json.loads((tmp_path / "work" / "tiny_decode_step_patch" / "patch.json").read_text())["kernels"]
    assert {k["name"] for k in patched} & set(ours), (patched, ours)
