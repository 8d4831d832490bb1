"""The launch-parameter tuner: what it finds, how it edits (byte-exact), and how it proposes."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import pytest

from kernelsmith.evolve import tuner, tuner_launch, tuner_search
from kernelsmith.evolve.tuner import Param

REPO = Path(__file__).resolve().parents[2]
CASES = REPO / "tests" / "cases"
POW2_FROM_256 = (256, 512, 1024, 2048, 4096, 8192, 16384)
DOT_RANGE = (16, 32, 64, 128, 256)
WARPS = (1, 2, 4, 8, 16)


def read(path: Path) -> str:
    return path.read_text()


def candidate_files() -> list[Path]:
    files = [
        CASES / "elementwise_triton.py",
        CASES / "rowsum_triton.py",
        CASES / "matmul_triton.py",
        REPO / "examples" / "softmax" / "triton_softmax.py",
    ]
    files += sorted((REPO / "benchmarks" / "tasks").glob("*_triton.py"))
    files += sorted((REPO / "examples" / "suite_seeds").glob("*.py"))  # extra material when present
    return files


def written(params: list[Param]) -> list[Param]:
    """The parameters the code writes (launch options it leaves out, which the tuner adds, dropped)."""
    return [p for p in params if not p.added]


def written_config(code: str) -> dict[str, int]:
    return {p.key: p.value for p in written(tuner.find_params(code))}


def full(code: str, config: dict[str, int]) -> dict[str, int]:
    """`config` with the launch options the code leaves out at their defaults (a measured config)."""
    return {**{p.key: p.value for p in tuner.find_params(code) if p.added}, **config}


def changed_lines(old: str, new: str) -> list[tuple[str, str]]:
    """(removed, added) line pairs; asserts the edit kept the line count and touched nothing else."""
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    assert len(a) == len(b)
    return [(x, y) for x, y in zip(a, b) if x != y]


# ----- find_params --------------------------------------------------------------------------------


def test_find_params_assignment_form():
    assert written(tuner.find_params(read(CASES / "elementwise_triton.py"))) == [
        Param("relu_mul_add_kernel.BLOCK", "block", 4096, POW2_FROM_256)
    ]


def test_find_params_literal_keywords_and_num_warps():
    assert written(tuner.find_params(read(REPO / "benchmarks/tasks/softmax_triton.py"))) == [
        Param("softmax_kernel.BLOCK_SIZE", "block", 4096, POW2_FROM_256),
        Param("softmax_kernel.num_warps", "num_warps", 16, WARPS),
    ]
    assert written(tuner.find_params(read(REPO / "benchmarks/tasks/rmsnorm_triton.py"))) == [
        Param("rmsnorm_kernel.BLOCK_S", "block", 512, tuple(2**i for i in range(5, 14))),
        Param("rmsnorm_kernel.num_warps", "num_warps", 4, WARPS),
    ]


def test_find_params_matmul_tuple_assignment_keeps_dot_range():
    assert written(tuner.find_params(read(CASES / "matmul_triton.py"))) == [
        Param("matmul_kernel.BLOCK_M", "block", 32, DOT_RANGE),
        Param("matmul_kernel.BLOCK_N", "block", 32, DOT_RANGE),
        Param("matmul_kernel.BLOCK_K", "block", 16, DOT_RANGE),
    ]


def test_launch_options_left_out_are_added_at_their_defaults():
    params = tuner.find_params(read(CASES / "elementwise_triton.py"))
    assert [p for p in params if p.added] == [
        Param("relu_mul_add_kernel.num_warps", "num_warps", 4, WARPS, added=True),
        Param("relu_mul_add_kernel.num_stages", "num_stages", 3, (1, 2, 3, 4, 5), added=True),
    ]
    code = read(CASES / "elementwise_triton.py")
    new = tuner.apply_config(code, full(code, {"relu_mul_add_kernel.num_warps": 8}))
    [(_, line)] = changed_lines(code, new)
    assert line.rstrip().endswith("num_warps=8)")  # only the changed option is written; stages stay absent
    assert tuner.config_of(new) == tuner.config_of(code) | {"relu_mul_add_kernel.num_warps": 8}
    assert tuner.skeleton_hash(new) == tuner.skeleton_hash(code)  # written or not, one family
    assert tuner.apply_config(new, tuner.config_of(code)) != new  # back to 4: written as 4, still legal


def test_computed_blocks_are_scaled_and_a_whole_row_never_shrinks():
    rowsum = read(CASES / "rowsum_triton.py")  # BLOCK=triton.next_power_of_2(n), no loop over it
    (scale,) = [p for p in tuner.find_params(rowsum) if p.kind == "scale"]
    assert scale.value == 16 and scale.choices == (16, 32)  # x1 or x2, never below the row
    new = tuner.apply_config(rowsum, {**tuner.config_of(rowsum), scale.key: 32})
    [(_, line)] = changed_lines(rowsum, new)
    assert "next_power_of_2(" in line and ") * 2" in line
    assert tuner.config_of(new)[scale.key] == 32 and tuner.skeleton_hash(new) == tuner.skeleton_hash(rowsum)
    looping = make(
        "    k[(n,)](x, n, BLOCK=min(triton.next_power_of_2(n), 1024), CHUNK=64)",
    ).replace("offs = tl.program_id(0)", "for _ in range(0, n, BLOCK):\n        pass\n    offs = tl.program_id(0)")
    params = {p.key: p for p in tuner.find_params(looping)}
    assert params["k.BLOCK.scale"].choices == (2, 4, 8, 16, 32)  # a blocked loop may shrink its block
    assert 256 in params["k.BLOCK.cap"].choices  # and its min() cap may go down
    down = tuner.apply_config(looping, {**tuner.config_of(looping), "k.BLOCK.scale": 4, "k.BLOCK.cap": 2048})
    assert "BLOCK=max(min(triton.next_power_of_2(n), 2048) // 4, 16)" in down
    assert tuner.config_of(down)["k.BLOCK.scale"] == 4 and tuner.skeleton_hash(down) == tuner.skeleton_hash(looping)
    whole_row = make("    k[(n,)](x, n, BLOCK=min(triton.next_power_of_2(n), 1024), CHUNK=64)")
    assert min(p.choices for p in tuner.find_params(whole_row) if p.key == "k.BLOCK.cap")[0] == 1024


def test_a_launch_without_tunable_literals_gets_eight_distinct_variants():
    code = read(REPO / "examples/softmax/triton_softmax.py")  # block = next_power_of_2(n), no num_warps
    seen = walk(code, seed=1, limit=8, stop_at_limit=True)
    children = {tuner.apply_config(code, c) for c in seen}
    assert len(seen) == 8 and len(children) == 8 and code not in children
    for child in children:
        compile(child, "child.py", "exec")


def test_autotune_configs_are_tuned_and_the_launch_left_to_autotune():
    autotune = (
        '@triton.autotune(configs=[triton.Config({"BLOCK": 128}, num_warps=4),'
        ' triton.Config({"BLOCK": 256}, num_warps=8, num_stages=2)], key=["n"])\n@triton.jit'
    )
    code = make("    k[(n,)](x, n, CHUNK=64)", autotune)
    assert [p.key for p in tuner.find_params(code)] == [
        "k.CHUNK",
        "k.config0.BLOCK",
        "k.config0.num_warps",
        "k.config1.BLOCK",
        "k.config1.num_warps",
        "k.config1.num_stages",
    ]  # nothing added at the launch: autotune owns the options
    new = tuner.apply_config(code, {"k.config1.BLOCK": 512, "k.config1.num_stages": 4})
    assert 'triton.Config({"BLOCK": 512}, num_warps=8, num_stages=4)' in new
    assert tuner.skeleton_hash(new) == tuner.skeleton_hash(code)


KERNEL = '''import triton
import triton.language as tl


{decorators}
def k(x_ptr, n, BLOCK: tl.constexpr, CHUNK: tl.constexpr, EXTRA: tl.constexpr = 64):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK) + tl.arange(0, CHUNK)[:1] * EXTRA
    tl.store(x_ptr + offs, 1.0, mask=offs < n)


def launch(x, n, big):
{body}
'''


def make(body: str, decorators: str = "@triton.jit") -> str:
    return KERNEL.format(decorators=decorators, body=body)


@pytest.mark.parametrize(
    "body",
    [
        "    BLOCK = 1024\n    if big:\n        BLOCK = 2048\n    k[(triton.cdiv(n, BLOCK),)](x, n, BLOCK=BLOCK, CHUNK=n)",  # bound twice
        "    BLOCK = 1000\n    k[(triton.cdiv(n, BLOCK),)](x, n, BLOCK=BLOCK, CHUNK=n)",  # not a power of two
        "    BLOCK = 2 * 512\n    k[(triton.cdiv(n, BLOCK),)](x, n, BLOCK=BLOCK, CHUNK=n)",  # an expression
        "    for BLOCK in (256, 512):\n        k[(triton.cdiv(n, BLOCK),)](x, n, BLOCK=BLOCK, CHUNK=n)",  # a loop variable
        "    k[(triton.cdiv(n, 256),)](x, n, 256, n)",  # positional: not a keyword
    ],
)
def test_non_literal_or_ambiguous_values_are_skipped(body):
    assert written(tuner.find_params(make(body))) == []


def test_kernel_defaults_and_non_constexpr_keywords_are_not_tuned():
    code = make("    k[(n,)](x_ptr=x, n=4096, BLOCK=256, CHUNK=64)")
    assert [p.key for p in written(tuner.find_params(code))] == ["k.BLOCK", "k.CHUNK"]  # EXTRA's default 64 stays
    code = make("    BLOCK = 256\n    k[(triton.cdiv(n, BLOCK),)](x, n, BLOCK=BLOCK, CHUNK=n, num_warps=big)")
    # num_warps=big is not a literal, and it is written, so not added either
    assert [p.key for p in tuner.find_params(code)] == ["k.BLOCK", "k.num_stages"]


MODED = '''import triton
import triton.language as tl


@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr, MODE: tl.constexpr, VEC: tl.constexpr, BM: tl.constexpr, SPLIT_K: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, 1.0 * MODE * VEC * BM * SPLIT_K, mask=offs < n)


def launch(x, n):
    k[(triton.cdiv(n, 256),)](x, n, BLOCK=256, MODE=1, VEC=4, BM=32, SPLIT_K=2)
'''


def test_only_block_like_constexprs_are_tuned_unless_the_user_names_them():
    """Issue 55: `MODE=1` was tried as `MODE=2` in 3 of 5 iterations: a constexpr that is not a block is the
    kernel's meaning. BLOCK*, BM/BN/BK, SPLIT_K are tuned; MODE and VEC only where [tuner] constexprs names them."""
    assert [p.key for p in written(tuner.find_params(MODED))] == ["k.BLOCK", "k.BM", "k.SPLIT_K"]
    named = frozenset({"VEC"})
    assert [p.key for p in written(tuner.find_params(MODED, named=named))] == ["k.BLOCK", "k.VEC", "k.BM", "k.SPLIT_K"]
    assert tuner.skeleton_hash(MODED) != tuner.skeleton_hash(MODED.replace("MODE=1", "MODE=2"))  # another program
    child = tuner.apply_config(MODED, {"k.VEC": 8}, named=named)
    assert "VEC=8" in child and "MODE=1" in child
    rng, measured = random.Random(0), {}
    for _ in range(20):  # whatever the tuner proposes, MODE stays 1
        proposal = tuner_search.propose(MODED, measured, rng)
        assert proposal is not None and "MODE=1, VEC=4" in proposal[0]
        measured[frozenset(proposal[1].items())] = 1.0
    # the config names them, and the engine's tuning memory takes it from there
    from kernelsmith.evolve.config import EvolveConfig

    cfg = EvolveConfig.model_validate({"tuner": {"constexprs": ["VEC"]}})
    assert cfg.tuner.constexprs == ["VEC"] and EvolveConfig().tuner.constexprs == []


def test_autotuned_and_heuristic_params_are_skipped():
    autotune = '@triton.autotune(configs=[triton.Config({"BLOCK": 128}, num_warps=4)], key=["n"])\n@triton.jit'
    code = make("    k[(n,)](x, n, BLOCK=256, CHUNK=64, num_warps=4, num_stages=2)", autotune)
    # autotune owns BLOCK, warps, stages at the launch; its config list is tuned instead
    assert [p.key for p in tuner.find_params(code)] == ["k.CHUNK", "k.config0.BLOCK", "k.config0.num_warps"]
    heuristics = '@triton.heuristics(values={"CHUNK": lambda args: 64})\n@triton.jit'
    code = make("    k[(n,)](x, n, BLOCK=256, CHUNK=64, num_warps=4)", heuristics)
    assert [p.key for p in written(tuner.find_params(code))] == ["k.BLOCK", "k.num_warps"]
    plain = make("    k[(n,)](x, n, BLOCK=256, CHUNK=64, num_warps=4)", "@jit")
    assert [p.key for p in written(tuner.find_params(plain))] == ["k.BLOCK", "k.CHUNK", "k.num_warps"]


def test_only_kernels_of_the_file_are_launch_sites():
    code = make("    k[(n,)](x, n, BLOCK=256, CHUNK=64)", "@torch.compile")
    assert tuner.find_params(code) == []


def test_second_launch_site_of_a_kernel_gets_its_own_key():
    code = make("    k[(n,)](x, n, BLOCK=256, CHUNK=64)\n    k[(n,)](x, n, BLOCK=512, CHUNK=32, num_warps=2)")
    assert tuner.config_of(code) == {
        "k.BLOCK": 256,
        "k.CHUNK": 64,
        "k.num_warps": 4,
        "k.num_stages": 3,
        "k#2.BLOCK": 512,
        "k#2.CHUNK": 32,
        "k#2.num_warps": 2,
        "k#2.num_stages": 3,
    }
    new = tuner.apply_config(code, {"k#2.BLOCK": 1024})
    assert changed_lines(code, new) == [
        (
            "    k[(n,)](x, n, BLOCK=512, CHUNK=32, num_warps=2)\n",
            "    k[(n,)](x, n, BLOCK=1024, CHUNK=32, num_warps=2)\n",
        )
    ]


def test_one_name_feeding_two_keywords_is_one_param():
    code = make("    B = 128\n    k[(triton.cdiv(n, B),)](x, n, BLOCK=B, CHUNK=B)")
    assert written_config(code) == {"k.BLOCK": 128}


# ----- editing ------------------------------------------------------------------------------------


def test_assignment_form_edits_only_the_assignment():
    code = read(CASES / "elementwise_triton.py")
    new = tuner.apply_config(code, {"relu_mul_add_kernel.BLOCK": 1024})
    assert changed_lines(code, new) == [("        BLOCK = 4096\n", "        BLOCK = 1024\n")]
    assert written_config(new) == {"relu_mul_add_kernel.BLOCK": 1024}


def test_literal_keyword_form_edits_only_the_keywords():
    code = read(REPO / "benchmarks/tasks/softmax_triton.py")
    new = tuner.apply_config(code, {"softmax_kernel.BLOCK_SIZE": 1024, "softmax_kernel.num_warps": 4})
    [(old_line, new_line)] = changed_lines(code, new)
    assert old_line.replace("BLOCK_SIZE=4096, num_warps=16", "BLOCK_SIZE=1024, num_warps=4") == new_line


def test_tuple_assignment_edits_only_its_element():
    code = read(CASES / "matmul_triton.py")
    new = tuner.apply_config(code, {"matmul_kernel.BLOCK_N": 64})
    assert changed_lines(code, new) == [
        ("        BLOCK_M, BLOCK_N, BLOCK_K = 32, 32, 16\n", "        BLOCK_M, BLOCK_N, BLOCK_K = 32, 64, 16\n")
    ]


def test_inline_grid_literal_follows_its_block_keyword():
    code = read(REPO / "benchmarks/tasks/tiny_add_triton.py")
    new = tuner.apply_config(code, {"add_kernel.BLOCK": 1024})
    assert changed_lines(code, new) == [
        (
            "        add_kernel[(triton.cdiv(n, 4096),)](x, y, out, n, BLOCK=4096)\n",
            "        add_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)\n",
        )
    ]
    ambiguous = make("    k[(triton.cdiv(n, 256),)](x, n, BLOCK=256, CHUNK=256)")
    assert written(tuner.find_params(ambiguous)) == []  # which keyword the grid's 256 means is unknowable


def test_grid_pairing_survives_every_proposal():
    # both keywords have grid twins; a child where BLOCK met CHUNK's value would pair the grid differently
    code = make("    k[(triton.cdiv(n, 16), triton.cdiv(n, 32))](x, n, BLOCK=16, CHUNK=32, num_warps=4, num_stages=3)")
    assert written_config(code) == {"k.BLOCK": 16, "k.CHUNK": 32, "k.num_warps": 4, "k.num_stages": 3}
    new = tuner.apply_config(code, {"k.BLOCK": 64, "k.CHUNK": 128})
    assert (
        "    k[(triton.cdiv(n, 64), triton.cdiv(n, 128))](x, n, BLOCK=64, CHUNK=128, num_warps=4, num_stages=3)\n"
        in new
    )
    seen = walk(code, seed=2, check_children=False)
    assert all(c["k.BLOCK"] != c["k.CHUNK"] for c in seen)
    block, chunk, warps, stages = (set(p.choices) for p in tuner.find_params(code))
    assert len(seen) == (len(block) * len(chunk) - len(block & chunk)) * len(warps) * len(stages) - 1


def test_apply_config_rejects_unknown_keys_and_bad_values():
    code = read(CASES / "elementwise_triton.py")
    with pytest.raises(ValueError, match="unknown tuning keys"):
        tuner.apply_config(code, {"relu_mul_add_kernel.BLOCK_SIZE": 1024})
    with pytest.raises(ValueError, match="positive int"):
        tuner.apply_config(code, {"relu_mul_add_kernel.BLOCK": 0})
    assert tuner.apply_config(code, {}) == code
    with pytest.raises(ValueError, match="not parseable"):
        tuner.find_params("def broken(:\n")


def test_skeleton_hash_ignores_tuned_values_only():
    code = read(CASES / "elementwise_triton.py")
    other = tuner.apply_config(code, {"relu_mul_add_kernel.BLOCK": 512})
    assert other != code and tuner.skeleton_hash(other) == tuner.skeleton_hash(code)
    changed = code.replace("* y + 1.0", "* y + 2.0")
    assert tuner.skeleton_hash(changed) != tuner.skeleton_hash(code)
    assert tuner.skeleton_hash(read(CASES / "matmul_triton.py")) != tuner.skeleton_hash(code)


# ----- propose ------------------------------------------------------------------------------------


def key(config: dict[str, int]) -> frozenset:
    return frozenset(config.items())


def walk(
    code: str, seed: int, check_children: bool = True, limit: int = 10_000, stop_at_limit: bool = False
) -> list[dict[str, int]]:
    """Propose from `code` until None (or `limit` proposals, with `stop_at_limit`), recording each
    proposal with a random score."""
    rng, measured, seen = random.Random(seed), {}, []
    for _ in range(limit):
        proposal = tuner_search.propose(code, measured, rng)
        if proposal is None:
            return seen
        new, config = proposal
        assert key(config) not in measured and config != tuner.config_of(code)
        if check_children:  # re-parsing every child is the slow part of these walks
            assert tuner.config_of(new) == config  # the child has the same params...
            assert tuner.skeleton_hash(new) == tuner.skeleton_hash(code)  # ...and the same skeleton
        measured[key(config)] = rng.random()
        seen.append(config)
    if stop_at_limit:
        return seen
    raise AssertionError("propose never ran out")


def test_propose_walks_every_config_once_then_stops():
    code = make("    k[(triton.cdiv(n, 16),)](x, n, BLOCK=16, CHUNK=n, num_warps=1, num_stages=1)")
    params = tuner.find_params(code)
    assert [len(p.choices) for p in params] == [5, 5, 5]  # 16..256, 1..16, 1..5
    seen = walk(code, seed=3)
    assert len(seen) == 5 * 5 * 5 - 1 == len({key(c) for c in seen})


def test_matmul_walk_respects_the_register_and_shared_memory_bounds():
    code = read(CASES / "matmul_triton.py")
    params = tuner.find_params(code)

    def acc(c):  # the fp32 accumulator, per warp
        return c["matmul_kernel.BLOCK_M"] * c["matmul_kernel.BLOCK_N"] / c["matmul_kernel.num_warps"]

    def staged(c):  # pipelined A and B tiles in shared memory
        m, n, k = (c[f"matmul_kernel.BLOCK_{d}"] for d in "MNK")
        return c["matmul_kernel.num_stages"] * (m * k + k * n)

    def legal(c):
        return acc(c) <= 32 * 256 and staged(c) <= tuner_search.STAGED_TILE_BOUND

    everything = [dict(zip([p.key for p in params], v)) for v in itertools.product(*(p.choices for p in params))]
    allowed = [c for c in everything if legal(c)]
    assert len([c for c in everything if acc(c) <= 32 * 256]) > len(allowed)  # the stage bound bites
    assert len([c for c in everything if staged(c) <= tuner_search.STAGED_TILE_BOUND]) > len(allowed)  # and registers
    # Hopper's best-known GEMM tiles are legal: 128x256x64 with 8 warps and 3 stages (and 4 warps for 128x256x32)
    best = {"matmul_kernel.BLOCK_M": 128, "matmul_kernel.BLOCK_N": 256, "matmul_kernel.BLOCK_K": 64}
    assert legal(best | {"matmul_kernel.num_warps": 8, "matmul_kernel.num_stages": 3})
    assert not legal(best | {"matmul_kernel.num_warps": 2, "matmul_kernel.num_stages": 3})
    an = tuner.analyze(code)
    assert {p.key for p in params} == set(best) | {"matmul_kernel.num_warps", "matmul_kernel.num_stages"}
    assert tuner_search.legal(best | {"matmul_kernel.num_warps": 8, "matmul_kernel.num_stages": 3}, an)
    assert not tuner_search.legal(
        best | {"matmul_kernel.num_warps": 8, "matmul_kernel.num_stages": 5}, an
    )  # 160 K elements
    seen = walk(code, seed=7, check_children=False, limit=300, stop_at_limit=True)
    assert len(seen) == 300 and all(legal(c) for c in seen)


def test_a_gemm_launch_tries_the_tutorial_configs_first_and_once():
    code = read(REPO / "examples" / "suite_seeds" / "batched_matmul.py")  # 64 x 64 x 32, num_warps=4
    names = ("bmm_kernel.BLOCK_M", "bmm_kernel.BLOCK_N", "bmm_kernel.BLOCK_K", "bmm_kernel.num_warps")
    first = walk(code, seed=1, check_children=False, limit=9, stop_at_limit=True)
    expected = [dict(zip((*names, "bmm_kernel.num_stages"), prior)) for prior in tuner_search.GEMM_PRIORS]
    assert first[:8] == expected  # all eight are legal here, in the tutorial's order
    assert first[8] not in expected  # then the walk
    # Hopper: num_ctas joins the config; from a parent that differs from a measured prior only
    # in num_ctas, that prior is not proposed again
    if "num_ctas" not in tuner_launch.triton_options():
        return
    seed_config = tuner.config_of(code, hopper=True)  # num_ctas 1, and no register cap (maxnreg)
    measured = {key({**seed_config, **c}): 1.0 for c in expected[:3]}
    parent = tuner.apply_config(code, {"bmm_kernel.num_ctas": 2}, hopper=True)
    proposal = tuner_search.propose(parent, measured, random.Random(0), hopper=True)
    assert proposal is not None and proposal[1] == {**seed_config, **expected[3], "bmm_kernel.num_ctas": 2}


def test_on_hopper_a_register_cap_is_added_and_no_cap_is_never_written():
    code = read(CASES / "elementwise_triton.py")
    if "maxnreg" not in tuner_launch.triton_options():
        pytest.skip("this Triton has no maxnreg option")
    assert "relu_mul_add_kernel.maxnreg" not in tuner.config_of(code)  # not Hopper: not tuned
    (p,) = [p for p in tuner.find_params(code, hopper=True) if p.kind == "maxnreg"]
    assert p.added and p.value == tuner_launch.NO_REG_CAP and p.choices == (32, 64, 128, 256)
    capped = tuner.apply_config(code, {p.key: 64}, hopper=True)
    assert "maxnreg=64" in capped and tuner.config_of(capped, hopper=True)[p.key] == 64
    assert tuner.skeleton_hash(capped, hopper=True) == tuner.skeleton_hash(code, hopper=True)
    # a written cap is tuned among caps: "no cap" would need the keyword removed, not 256 written
    (written,) = [q for q in tuner.find_params(capped, hopper=True) if q.kind == "maxnreg"]
    assert not written.added and written.choices == (32, 64, 128)
    uncapped = tuner.apply_config(capped, {p.key: 128}, hopper=True)
    assert "maxnreg=128" in uncapped and "maxnreg=256" not in tuner.apply_config(code, {p.key: 256}, hopper=True)


def test_autotune_configs_of_a_gemm_get_no_priors():
    code = """import torch, triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}, num_warps=4, num_stages=3)],
                 key=["M"])
@triton.jit
def mm(a, b, c, M, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    tl.store(c, tl.dot(tl.load(a), tl.load(b)))


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        c = torch.empty_like(a)
        mm[(1,)](a, b, c, a.shape[0])
        return c
"""
    an = tuner.analyze(code)
    assert len(an.tile_groups) == 1 and an.launch_tiles == 0  # the config's tiles are bounded, not primed
    _, config = tuner_search.propose(code, {}, random.Random(0))
    tiles = tuple(config[f"mm.config0.{k}"] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages"))
    assert tiles not in tuner_search.GEMM_PRIORS


def test_propose_continues_an_improving_direction():
    base = read(CASES / "elementwise_triton.py")
    current = tuner.apply_config(base, {"relu_mul_add_kernel.BLOCK": 2048})
    measured = {
        key(full(base, {"relu_mul_add_kernel.BLOCK": 1024})): 1.0,
        key(full(base, {"relu_mul_add_kernel.BLOCK": 2048})): 2.0,
    }
    for seed in range(20):
        new, config = tuner_search.propose(current, measured, random.Random(seed))
        assert config == full(base, {"relu_mul_add_kernel.BLOCK": 4096})
        assert "BLOCK = 4096" in new


def R(block: int, warps: int, stages: int = 3) -> dict[str, int]:
    """A measured config of benchmarks/tasks/relu_triton.py (num_stages left out there: Triton's 3)."""
    return {"relu_kernel.BLOCK_SIZE": block, "relu_kernel.num_warps": warps, "relu_kernel.num_stages": stages}


def test_propose_steps_past_a_better_neighbour():
    code = read(REPO / "benchmarks/tasks/relu_triton.py")  # BLOCK_SIZE 4096, num_warps 8
    measured = {
        key(R(4096, 8)): 1.0,
        key(R(4096, 4)): 1.5,
        key(R(8192, 8)): 0.5,
    }
    for seed in range(20):
        _, config = tuner_search.propose(code, measured, random.Random(seed))
        # warps 8 -> 4 gained 0.5, BLOCK 8192 -> 4096 gained 0.5 too: either continuation, nothing else
        assert config in (
            R(4096, 2),
            R(2048, 8),
        )
    measured[key(R(4096, 4))] = 3.0  # warps gain dominates
    assert tuner_search.propose(code, measured, random.Random(0))[1] == R(4096, 2)


def test_propose_prefers_parameters_not_yet_explored():
    code = read(REPO / "benchmarks/tasks/relu_triton.py")
    measured = {key(R(8192, 8)): 0.7}  # current unmeasured
    for seed in range(20):
        _, config = tuner_search.propose(code, measured, random.Random(seed))
        # BLOCK_SIZE was varied already; the move is one step of warps or of (added) stages
        assert config["relu_kernel.BLOCK_SIZE"] == 4096
        assert config in (R(4096, 4), R(4096, 16), R(4096, 8, 2), R(4096, 8, 4))


def test_propose_moves_two_steps_when_neighbours_are_measured():
    code = read(REPO / "benchmarks/tasks/relu_triton.py")  # BLOCK_SIZE 4096, num_warps 8
    params = tuner.find_params(code)

    def cfg(block, warps):
        return R(block, warps)

    measured = {
        key(R(4096, 8, 2)): 1.0,  # num_stages' neighbours measured too: only two-step moves are left near
        key(R(4096, 8, 4)): 1.0,
        key(cfg(4096, 8)): 1.0,
        key(cfg(2048, 8)): 1.0,
        key(cfg(8192, 8)): 1.0,
        key(cfg(4096, 4)): 1.0,
        key(cfg(4096, 16)): 1.0,
    }
    for seed in range(20):
        _, config = tuner_search.propose(code, measured, random.Random(seed))
        steps = sum(abs(p.choices.index(config[p.key]) - p.choices.index(p.value)) for p in params)
        assert steps == 2
    measured[key(cfg(8192, 8))], measured[key(cfg(4096, 4))] = 0.9, 1.2  # warps down gained, BLOCK up lost
    measured[key(cfg(2048, 8))] = 1.1
    measured[key(cfg(1024, 8))] = measured[key(cfg(4096, 2))] = 0.5  # continuing either way was tried
    for seed in range(5):  # both gains combine first: BLOCK down and warps down together
        assert tuner_search.propose(code, measured, random.Random(seed))[1] == cfg(2048, 4)


def test_propose_is_deterministic_given_the_rng():
    code = read(REPO / "benchmarks/tasks/rmsnorm_triton.py")
    assert walk(code, seed=11, check_children=False) == walk(code, seed=11, check_children=False)
    assert walk(code, seed=11, check_children=False) != walk(code, seed=12, check_children=False)


@pytest.mark.parametrize("path", candidate_files(), ids=lambda p: p.name)
def test_proposals_compile_and_keep_powers_of_two(path):
    code = read(path)
    rng, measured = random.Random(5), {}
    params = tuner.find_params(code)
    space = 1
    for p in params:
        space *= len(p.choices)
    for _ in range(6):
        proposal = tuner_search.propose(code, measured, rng)
        if proposal is None:
            assert not params or len(measured) == space - 1
            return
        new, config = proposal
        compile(new, str(path), "exec")
        for p in params:
            assert config[p.key] in p.choices
            if p.kind != "num_stages":
                assert config[p.key] & (config[p.key] - 1) == 0
        assert tuner.skeleton_hash(new) == tuner.skeleton_hash(code)
        measured[key(config)] = rng.random()


def test_propose_skips_pending_configs_without_reading_them_as_scores():
    import random as _random

    code = (CASES / "elementwise_small_blocks.py").read_text()
    first = tuner_search.propose(code, {}, _random.Random(0))
    assert first is not None
    again = tuner_search.propose(code, {}, _random.Random(0), pending={frozenset(first[1].items())})
    assert again is not None and again[1] != first[1]


def test_under_the_interpreter_no_launch_option_is_tuned_and_none_makes_another_program():
    """Issue 46, item 3: Triton's interpreter (the CPU) ignores num_warps, num_stages and every other
    launch option, so the tuner does not propose them there, and two programs that differ only in
    them have one identity (kernelsmith.identity), while a block size still makes another program."""
    from kernelsmith.identity import program_hash

    code = read(REPO / "examples" / "suite_seeds" / "softmax.py")  # BLOCK_SIZE = 1024, num_warps=4
    assert {p.kind for p in tuner.find_params(code)} == {"block", "num_warps", "num_stages"}
    assert [p.key for p in tuner.find_params(code, interpreted=True)] == ["softmax_kernel.BLOCK_SIZE"]
    autotune = '@triton.autotune(configs=[triton.Config({"BLOCK": 128}, num_warps=4, num_stages=2)], key=["n"])'
    autotuned = make("    k[(n,)](x, n, CHUNK=64)", autotune + "\n@triton.jit")
    assert [p.key for p in tuner.find_params(autotuned, interpreted=True)] == ["k.CHUNK", "k.config0.BLOCK"]
    for seed in range(3):  # whatever it proposes there changes the block
        proposal = tuner_search.propose(code, {}, random.Random(seed), interpreted=True)
        assert proposal is not None and set(proposal[1]) == {"softmax_kernel.BLOCK_SIZE"}

    def same(a: str, b: str) -> bool:
        return program_hash(a, interpreted=True) == program_hash(b, interpreted=True)

    options = code.replace("num_warps=4", "num_warps=8, num_stages=2, maxnreg=64")
    assert program_hash(options) != program_hash(code) and same(options, code)
    assert same(code.replace(", num_warps=4", ""), code)
    assert same(autotuned.replace("num_warps=4, num_stages=2", "num_warps=8"), autotuned)
    assert not same(code.replace("BLOCK_SIZE = 1024", "BLOCK_SIZE = 2048"), code)
    assert not same(autotuned.replace('"BLOCK": 128', '"BLOCK": 256'), autotuned)
    # a kernel parameter that shares an option's name is the kernel's, not the launch's
    own = code.replace("BLOCK_SIZE: tl.constexpr):", "BLOCK_SIZE: tl.constexpr, num_stages=1):")
    assert not same(own.replace("num_warps=4", "num_warps=4, num_stages=2"), own)
