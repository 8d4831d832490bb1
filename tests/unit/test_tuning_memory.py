"""The search's memory of measured launch configurations: families, their leaders, the stop reason."""

from __future__ import annotations

import random

from kernelsmith.evolve import tuner_launch as launch
from kernelsmith.evolve.program import Program
from kernelsmith.evolve.tuning import TuningMemory, annotate, hopper_or_newer

MATMUL = '''import torch, triton
import triton.language as tl


@triton.jit
def mm(a, b, c, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        acc += tl.dot(tl.load(a), tl.load(b))
    tl.store(c, acc)


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        c = torch.empty(a.shape[0], b.shape[1], device=a.device)
        grid = (triton.cdiv(a.shape[0], 64), triton.cdiv(b.shape[1], 64))
        mm[grid](a, b, c, a.shape[0], b.shape[1], a.shape[1], BLOCK_M=64, BLOCK_N=64, BLOCK_K=32)
        return c
'''


def prog(code: str) -> Program:
    return Program(iteration=1, island=0, operator="tune", code=code, status="correct")


def test_hopper_is_read_from_the_judges_capability():
    assert hopper_or_newer({"capability": "9.0"}) and hopper_or_newer({"capability": "10.0"})
    assert not hopper_or_newer({"capability": "8.9"})
    assert not hopper_or_newer({"device": "cpu"}) and not hopper_or_newer({"capability": "?"})


def test_leaders_are_the_best_correct_program_of_each_family():
    mem = TuningMemory()
    mem.record("a", {"k": 1}, 1.0, pid=1, ok=True)
    mem.record("a", {"k": 2}, 3.0, pid=2, ok=True)
    mem.record("a", {"k": 3}, 9.0, pid=3, ok=False)  # a wrong program leads nothing
    mem.record("b", {"k": 1}, 2.0, pid=4, ok=True)
    mem.record(None, None, 5.0, pid=5, ok=True)  # nothing tunable: no family
    assert mem.leader_ids() == [2, 4]
    assert mem.stats() == {
        "configurations_measured": 4,
        "families": 2,
        "families_correct": 2,
        "families_tuned": 0,
        "hopper_options": False,
    }


def test_on_hopper_num_ctas_joins_a_dot_kernels_configuration_and_its_family():
    plain, hopper = prog(MATMUL), prog(MATMUL)
    annotate(plain)
    annotate(hopper, hopper=True)
    has_ctas = "num_ctas" in launch.triton_options()
    assert ("mm.num_ctas" in hopper.config) is has_ctas and "mm.num_ctas" not in plain.config
    if not has_ctas:
        return
    mem = TuningMemory(hopper=True)
    mem.record(hopper.skeleton, hopper.config, 1.0, pid=1, ok=True)
    hopper.id = 1
    seen = set()
    for _ in range(40):
        code, cfg = mem.propose(hopper, random.Random(len(seen)))
        child = prog(code)
        annotate(child, hopper=True)
        assert child.skeleton == hopper.skeleton and child.config == cfg
        mem.record(child.skeleton, child.config, 0.5)
        seen.add(cfg["mm.num_ctas"])
    assert seen == {1, 2}
