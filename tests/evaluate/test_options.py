"""EvalOptions checks every value once (issue 15, item 5): the CLI, config files and the service
all build their options through it, so an out-of-range value is refused the same way everywhere."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from kernelsmith.evaluate.options import MAX_MEMORY_LIMIT, MIN_MEMORY_LIMIT, EvalOptions, parse_size

BAD = [
    ({"memory_limit": "banana"}, "memory_limit", "bad size"),
    ({"memory_limit": "-5G"}, "memory_limit", "bad size"),
    ({"memory_limit": "1e99G"}, "memory_limit", "bad size"),
    ({"memory_limit": None}, "memory_limit", "bad size"),
    ({"memory_limit": True}, "memory_limit", "bad size"),
    ({"memory_limit": 123}, "memory_limit", "below the least memory limit"),
    ({"memory_limit": 0}, "memory_limit", "below the least memory limit"),
    ({"memory_limit": -5 * 2**30}, "memory_limit", "below the least memory limit"),
    ({"memory_limit": "99999999T"}, "memory_limit", "more memory than any host"),
    ({"timeout": math.nan}, "timeout", "finite"),
    ({"timeout": math.inf}, "timeout", "finite"),
    ({"timeout": -1}, "timeout", "greater than 0"),
    ({"atol": -1}, "atol", "greater than or equal to 0"),
    ({"atol": math.nan}, "atol", "finite"),
    ({"rtol": math.inf}, "rtol", "finite"),
    ({"warmup_ms": -5}, "warmup_ms", "greater than or equal to 0"),
    ({"timing_budget_ms": math.nan}, "timing_budget_ms", "finite"),
    ({"trials": 0}, "trials", "greater than or equal to 1"),
    ({"min_reps": 50, "max_reps": 10}, None, "min_reps (50) is above max_reps (10)"),
    ({"torch_ops": "some"}, "torch_ops", "partial"),
    ({"device": "tpu"}, "device", "cuda"),
]


@pytest.mark.parametrize("values, field, needle", BAD, ids=[repr(b[0]) for b in BAD])
def test_out_of_range_option_is_refused_naming_the_field(values, field, needle):
    with pytest.raises(ValidationError) as info:
        EvalOptions(**values)
    first = info.value.errors()[0]
    assert (first["loc"][0] if first["loc"] else None) == field
    assert needle in first["msg"], first["msg"]


def test_good_values_are_kept():
    o = EvalOptions(memory_limit="1G", atol=0, rtol=1e-3, warmup_ms=0, timing_budget_ms=0, min_reps=3, max_reps=3)
    assert o.memory_limit == 2**30 and o.atol == 0 and o.rtol == 1e-3
    assert EvalOptions(memory_limit=MIN_MEMORY_LIMIT).memory_limit == MIN_MEMORY_LIMIT
    assert EvalOptions(memory_limit=MAX_MEMORY_LIMIT).memory_limit == MAX_MEMORY_LIMIT
    assert EvalOptions(memory_limit="1.5G").memory_limit == int(1.5 * 2**30)
    # a copy with the CPU's timing settings stays valid
    assert EvalOptions(device="cpu").effective_timing().min_reps == 3


@pytest.mark.parametrize(
    "text, n",
    [("512M", 512 * 2**20), ("3G", 3 * 2**30), ("3GiB", 3 * 2**30), ("2048", 2048), (" 1 k ", 1024), (4096, 4096)],
)
def test_parse_size(text, n):
    assert parse_size(text) == n
