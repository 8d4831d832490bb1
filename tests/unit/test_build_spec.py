"""Build specs (kernelsmith/evaluate/build/spec.py): what the pool reads from a candidate's source
must be what the sandbox's load_inline sees when the candidate runs, or no build is ever found."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from kernelsmith.evaluate.build.spec import bind_call, build_key, canonical, load_inline_kwargs, static_specs

FEW_SHOT = sorted((Path(__file__).resolve().parents[2] / "benchmarks/kernelbench/few_shot").glob("model_new_ex_*.py"))
ENV = {"torch": "t", "python": "p", "cxx": "c", "device": "cuda", "arch": "9.0+PTX", "nvcc": "n"}


def _runtime_specs(source: str, monkeypatch) -> list[dict]:
    """Run the candidate's module with a load_inline that records its arguments (as the sandbox's
    hook binds them) instead of building."""
    import torch.utils.cpp_extension as cpp

    seen: list[dict] = []

    def recorder(*args, **kwargs):
        named = bind_call(args, kwargs)
        assert named is not None
        spec = canonical(named)
        assert spec is not None
        seen.append(spec)
        return types.SimpleNamespace()

    monkeypatch.setattr(cpp, "load_inline", recorder)
    exec(compile(source, "candidate.py", "exec"), {"__name__": "candidate"})
    return seen


@pytest.mark.parametrize("path", FEW_SHOT, ids=lambda p: p.stem)
def test_kernelbench_few_shot_specs_read_statically_equal_the_runtime_call(path, monkeypatch):
    source = path.read_text()
    static = static_specs(source)
    assert len(static) == 1, "every few-shot example is built ahead"
    assert static == _runtime_specs(source, monkeypatch)
    assert build_key(static[0], ENV) == build_key(_runtime_specs(source, monkeypatch)[0], ENV)


def test_the_key_covers_the_sources_the_flags_and_the_gpu():
    spec = canonical({"name": "x", "cpp_sources": "int f();", "cuda_sources": "__global__ void k() {}"})
    assert spec is not None
    other_source = canonical({"name": "x", "cpp_sources": "int f(); ", "cuda_sources": "__global__ void k() {}"})
    other_flags = canonical({**load_inline_kwargs(spec), "extra_cuda_cflags": ["-O2"]})
    assert other_source is not None and other_flags is not None
    keys = {
        build_key(spec, ENV),
        build_key(other_source, ENV),
        build_key(other_flags, ENV),
        build_key(spec, {**ENV, "arch": "8.0+PTX"}),
        build_key(spec, {**ENV, "torch": "t2"}),
    }
    assert len(keys) == 5


def test_equivalent_spellings_of_a_call_have_one_spec():
    a = canonical({"name": "x", "cpp_sources": "s", "functions": "f", "verbose": True, "build_directory": "/tmp/q"})
    b = canonical(
        {"name": "x", "cpp_sources": ["s"], "cuda_sources": None, "functions": ["f"], "keep_intermediates": False}
    )
    assert a == b and a is not None
    assert canonical(load_inline_kwargs(a)) == a  # the builder rebuilds exactly this spec


@pytest.mark.parametrize(
    "arguments",
    [
        {"name": "x", "cpp_sources": "s", "is_python_module": False},  # a torch.ops library, not a module
        {"name": "x", "cpp_sources": "s", "sycl_sources": "q"},
        {"name": "x", "cpp_sources": "s", "unknown_option": 1},
        {"name": "x", "cpp_sources": 3},
        {"name": "", "cpp_sources": "s"},
        {"name": "x", "cpp_sources": "s", "with_cuda": "yes"},
    ],
)
def test_calls_that_cannot_be_built_ahead_have_no_spec(arguments):
    assert canonical(arguments) is None


def test_functions_as_a_dict_keep_their_docstrings():
    spec = canonical({"name": "x", "cpp_sources": "s", "functions": {"f": "doc f", "g": "doc g"}})
    assert spec is not None
    assert load_inline_kwargs(spec)["functions"] == {"f": "doc f", "g": "doc g"}


def test_sources_built_from_plain_data_are_read():
    source = '''
import textwrap
from torch.utils.cpp_extension import load_inline
HEADER = "#include <cuda_runtime.h>\\n"
body = textwrap.dedent("""
    __global__ void k() {}
""")
decl: str = "void f();"
ext = load_inline("ext", cpp_sources=[decl], cuda_sources=HEADER + body.strip(), functions=("f",),
                  extra_cuda_cflags=["-O3"] + ["--use_fast_math"], verbose=True)
class ModelNew:
    def __init__(self):
        self.other = load_inline(name="lazy", cpp_sources=f"int g();", functions=["g"])
'''
    specs = static_specs(source)
    assert [s["name"] for s in specs] == ["ext", "lazy"]
    assert specs[0]["cuda_sources"] == ["#include <cuda_runtime.h>\n__global__ void k() {}"]
    assert specs[0]["extra_cuda_cflags"] == ["-O3", "--use_fast_math"]


@pytest.mark.parametrize(
    "call",
    [
        'load_inline("e", cpp_sources=src)',  # src is assigned twice
        'load_inline("e", cpp_sources=f"{N}")',  # an f-string with a field
        'load_inline("e", cpp_sources="s", **opts)',
        'load_inline("e", "s", None, None, ["f"])',  # positional beyond the three every torch agrees on
        'load_inline("e", cpp_sources=make_source())',
        'load_inline("e", cpp_sources=loop_var)',
    ],
)
def test_sources_that_need_the_candidate_to_run_are_left_to_the_sandbox(call):
    source = f"""
from torch.utils.cpp_extension import load_inline
N = 3
src = "a"
src = src + "b"
opts = {{}}
for loop_var in ["x"]:
    pass
def make_source():
    return "s"
ext = {call}
"""
    assert static_specs(source) == []


def test_a_source_that_does_not_parse_or_nests_too_deep_has_no_specs():
    assert static_specs("def broken(:\n") == []
    deep = "a0 = 'x'\n" + "".join(f"a{i + 1} = a{i} + 'x'\n" for i in range(100))
    assert static_specs(deep + "e = load_inline('e', cpp_sources=a100)\n") == []
    assert static_specs(deep + "e = load_inline('e', cpp_sources=a10)\n")[0]["cpp_sources"] == ["x" * 11]
