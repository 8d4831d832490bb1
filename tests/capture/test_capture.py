"""`kernelsmith capture`: a model's forward cut into ranked, validated KernelBench tasks (CPU, tiny models)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from conftest import REPO

from kernelsmith.capture import profile, write_task
from kernelsmith.capture import run as run_module
from kernelsmith.capture.entry import call_entry
from kernelsmith.capture.run import capture
from kernelsmith.errors import UserError
from kernelsmith.evaluate.runtime import build_model, make_inputs
from kernelsmith.task import Task, load_module

LLAMA = REPO / "examples/llama_decode/model.py"
PLAIN = """
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(32, 48)
        self.weight = nn.Parameter(torch.ones(48))

    def forward(self, x):
        PROFILED.append(torch.autograd._profiler_enabled())
        h = self.proj(x)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight
        return torch.nn.functional.gelu(h)


PROFILED = []  # per forward: was the profiler on


def make():
    torch.manual_seed(0)
    return Block(), (torch.randn(4, 32),)


def not_a_pair():
    return Block()


def raises():
    return Block(), (torch.randn(4, 31),)


def pair_form():
    return Block(), ((torch.randn(4, 32),), {})


class InPlace(nn.Module):
    # In-place ops on a region's input: the model's own input scaled, a ReLU(inplace=True) after a GEMM.

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(32, 48)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x):
        x.mul_(0.5)
        h = self.act(self.proj(x))
        return h.mul_(2.0) + 1.0


def make_in_place():
    torch.manual_seed(0)
    return InPlace(), (torch.randn(4, 32),)
"""


@pytest.fixture
def plain_entry(tmp_path: Path) -> str:
    path = tmp_path / "plain_model.py"
    path.write_text(textwrap.dedent(PLAIN))
    return f"{path}:make"


def _ops(task) -> set[str]:
    return set(task.ops)


def _runs(path: Path) -> None:
    """The task loads as a task and its reference runs as the evaluator runs it."""
    task = Task.from_file(path)
    module = load_module(task.source, path.parent / f"_run_{path.stem}.py", f"_capture_run_{path.stem}")
    model = build_model(module.Model, module, 0, "cpu")
    with torch.no_grad():
        out = model(*make_inputs(module, 0, "cpu"))
    assert all(torch.isfinite(o).all() for o in (out if isinstance(out, tuple) else (out,)))


def test_plain_module_is_cut_at_the_gemm(plain_entry: str, tmp_path: Path):
    done = capture(plain_entry, tmp_path / "out")
    written = [t for t in done.tasks if t.file and not t.fused]  # the split regions (fused: test_capture_fused.py)
    assert len(written) == 2 and all(t.validated for t in written)
    gemm = next(t for t in written if "addmm.default" in t.ops)
    norm = next(t for t in written if "gelu.default" in t.ops)
    assert gemm.ops == ["addmm.default"] and gemm.module_paths == ["proj"] and gemm.module_class == "Linear"
    assert {"pow.Tensor_Scalar", "mean.dim", "rsqrt.default", "mul.Tensor"} <= _ops(norm)
    assert norm.module_class == "Block" and norm.name.startswith("block_")
    source = (tmp_path / "out" / norm.file).read_text()
    assert "nn.Parameter(" in source and "from weight" in source and f"`kernelsmith capture {plain_entry}`" in source
    manifest = json.loads((tmp_path / "out/capture.json").read_text())
    assert [t["rank"] for t in manifest["tasks"]] == [1, 2, 3] and manifest["covered_share"] > 0
    assert [t["fused"] for t in manifest["tasks"] if t["fused"]] == ["epilogue"]  # the GEMM with its norm and GELU
    for t in written:
        _runs(tmp_path / "out" / t.file)


def test_ranks_are_each_ops_least_over_profiled_forwards_and_the_time_per_forward_is_unprofiled(
    plain_entry: str, tmp_path: Path, monkeypatch
):
    tapes, forwards = [], []
    real_record, real_read = run_module.record, profile.read_times
    monkeypatch.setattr(run_module, "record", lambda *a: tapes.append(real_record(*a)) or tapes[-1])

    def read(prof, n_ops, device, overhead_us):  # 10 us an op; three forwards of five under load: the GEMM 100x
        times = real_read(prof, n_ops, device, overhead_us)
        forwards.append(times)
        loaded = len(forwards) in (2, 3, 4)  # a load that lasts (issue 55): a median would take it
        times.per_op_us = [1000.0 if loaded and op.name == "addmm.default" else 10.0 for op in tapes[0].ops]
        times.total_us = sum(times.per_op_us) * 1.25
        return times

    monkeypatch.setattr(profile, "read_times", read)
    done = capture(plain_entry, tmp_path / "out", forwards=5)
    assert len(forwards) == 5 and done.forwards == 5
    split = [t for t in done.tasks if not t.fused]  # the fused GEMM + norm + GELU holds both, ranked first
    gemm, norm = (next(t for t in split if op in t.ops) for op in ("addmm.default", "gelu.default"))
    assert norm.rank == 2 and gemm.rank == 3  # loaded forwards do not move the ranks
    # each op's least time: the load moves no share; the spread (to the upper quartile) shows it
    assert gemm.share == pytest.approx(0.8 / len(tapes[0].ops)) and gemm.share_range[1] > 0.5
    manifest = json.loads((tmp_path / "out/capture.json").read_text())
    # The shares' whole is the forward under the per-op ranges; the profiled time apply compares with is
    # the forward profiled without them (on the CPU the ranges cost host time of their own).
    assert manifest["total_us"] == pytest.approx(min(f.total_us for f in forwards))  # each op's least, and outside
    assert 0 < manifest["profiled_us"]["low"] <= manifest["profiled_us"]["median"] <= manifest["profiled_us"]["high"]
    # The forward's own time is measured apart, the profiler off (warm-up, 5 timed, the record); then 5
    # profiled with the per-op ranges, each followed by one without.
    assert sys.modules["_kernelsmith_capture_plain_model"].PROFILED == [False] * 7 + [True] * 10
    assert 0 < manifest["wall_ms"]["low"] <= manifest["wall_ms"]["median"] <= manifest["wall_ms"]["high"]


def test_a_wrong_replay_is_caught_and_not_written(plain_entry: str, tmp_path: Path, monkeypatch):
    real = write_task.call_text
    monkeypatch.setattr(write_task, "call_text", lambda *a: real(*a).replace(".gelu.", ".relu."))
    done = capture(plain_entry, tmp_path / "out")
    norm = next(t for t in done.tasks if not t.fused and "gelu.default" in t.ops)
    assert norm.file is None and not norm.validated and "differs from the model's" in (norm.why or "")
    assert not list((tmp_path / "out").glob("*block*"))
    listed = json.loads((tmp_path / "out/capture.json").read_text())["tasks"]
    assert next(t for t in listed if t["name"] == norm.name)["why"] == norm.why  # ranks follow measured times


def test_regions_that_write_their_inputs_in_place_are_written_and_right(plain_entry: str, tmp_path: Path):
    done = capture(plain_entry.replace(":make", ":make_in_place"), tmp_path / "out")
    # Each region is written (it once was refused: "output 0 differs from the model's"), and writes a clone.
    assert all(t.file for t in done.tasks), [(t.name, t.why) for t in done.tasks]
    assert {"mul_.Tensor", "relu_.default"} <= {op for t in done.tasks for op in t.ops}
    scaled = next(t for t in done.tasks if t.ops == ["mul_.Tensor"])
    assert ".clone()" in (tmp_path / "out" / scaled.file).read_text()  # type: ignore[operator]
    for t in done.tasks:
        _runs(tmp_path / "out" / t.file)  # type: ignore[operator]


@pytest.fixture(scope="module", params=["tiny_decode_step", "tiny_prefill"])
def llama(request, tmp_path_factory):
    pytest.importorskip("transformers")
    out = tmp_path_factory.mktemp(request.param)
    return capture(f"{LLAMA}:{request.param}", out), out


def test_llama_operators_come_out_as_tasks(llama):
    done, out = llama
    written = [t for t in done.tasks if t.file]
    assert written and all(t.validated for t in written), [(t.name, t.why) for t in done.tasks if not t.validated]
    has = lambda cond: [t for t in written if cond(t) and not t.fused]  # the split regions (fused: test_capture_fused)
    assert has(lambda t: t.module_class == "LlamaRMSNorm" and t.name == "llamarmsnorm")
    assert has(lambda t: {"neg.default", "cat.default", "mul.Tensor", "add.Tensor"} <= _ops(t))  # rotary
    silu_mul = has(lambda t: t.module_class == "LlamaMLP" and {"silu.default", "mul.Tensor"} <= _ops(t))
    assert silu_mul and silu_mul[0].calls == 2  # one task for both layers
    add_norm = has(lambda t: t.module_class == "LlamaDecoderLayer" and {"add.Tensor", "rsqrt.default"} <= _ops(t))
    assert add_norm and add_norm[0].name == "llamadecoderlayer_add_llamarmsnorm"
    assert has(lambda t: any("scaled_dot_product" in op for op in t.ops))  # attention
    assert not any(t.data_dependent for t in done.tasks)  # no shape here counts the data (masks select none)
    shares = [t.share for t in done.tasks]
    # Shares are measured CPU times here (the forward's Python between ops is in the total): only
    # their order and bounds are the capture's to keep, not their values.
    split = sum(t.share for t in done.tasks if not t.fused)  # a fused region holds split ones' ops: shares overlap
    assert shares == sorted(shares, reverse=True) and 0.0 < split <= 1.0 + 1e-6
    for t in written:
        _runs(out / t.file)


@pytest.mark.parametrize(
    "entry, message",
    [
        ("nocolon", "is not 'package.module:factory'"),
        ("missing_dir/none.py:make", "file not found"),
        ("no_such_package_ks:make", "cannot import module no_such_package_ks"),
        ("{plain}:absent", "has no absent"),
        ("{plain}:torch", "torch is not callable"),
        ("{plain}:not_a_pair", "must return (model, inputs), not Block"),
    ],
)
def test_bad_entry_is_one_clear_error(plain_entry: str, entry: str, message: str):
    with pytest.raises(UserError) as exc:
        call_entry(entry.format(plain=plain_entry.rsplit(":", 1)[0]), "cpu")
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_inputs_given_as_args_and_kwargs_name_the_forms_and_suggest_the_dict(plain_entry: str, tmp_path: Path):
    """`(model, (args, kwargs))` is two positional arguments: the forward fails, and the line says why."""
    with pytest.raises(UserError) as exc:
        capture(plain_entry.replace(":make", ":pair_form"), tmp_path / "out", forwards=1)
    said = str(exc.value)
    assert "the model's forward raised" in said and "\n" not in said
    assert "inputs as (args, kwargs), which is two positional arguments here" in said
    assert "return (model, dict(name=value, ...)) for keyword arguments" in said
    with pytest.raises(UserError) as exc:
        capture(plain_entry.replace(":make", ":raises"), tmp_path / "out", forwards=1)
    assert "(args, kwargs)" not in str(exc.value)


def test_out_dir_of_other_files_is_refused_a_previous_capture_replaced(plain_entry: str, tmp_path: Path):
    (tmp_path / "mine.txt").write_text("keep")
    with pytest.raises(UserError, match="is not empty and holds no previous capture"):
        capture(plain_entry, tmp_path)
    assert (tmp_path / "mine.txt").read_text() == "keep"
    out = tmp_path / "out"
    first = capture(plain_entry, out)
    (out / first.tasks[0].file).write_text("stale")  # type: ignore[operator]
    second = capture(plain_entry, out)
    # The folder holds exactly the second capture, nothing of the first.
    written = {p.name for p in out.iterdir()}
    assert written == {t.file for t in second.tasks if t.file} | {"capture.json"}
    assert not any("stale" in (out / name).read_text() for name in written)
    # `kernelsmith seed TASK.py` writes TASK_seed.py beside its task: a re-capture keeps it, refuses nothing.
    seed = out / first.tasks[0].file.replace(".py", "_seed.py")  # type: ignore[union-attr]
    seed.write_text("# a seed")
    third = capture(plain_entry, out, forwards=1)
    assert {p.name for p in out.iterdir()} == {t.file for t in third.tasks if t.file} | {"capture.json", seed.name}
    assert seed.read_text() == "# a seed"


def test_cli_capture_end_to_end(tmp_path: Path):
    pytest.importorskip("transformers")
    ks = Path(sys.executable).parent / "kernelsmith"
    run = lambda *a: subprocess.run([str(ks), "capture", *a], capture_output=True, text=True, cwd=REPO, timeout=300)
    p = run(f"{LLAMA}:tiny_decode_step", "--out", str(tmp_path / "cap"), "--top", "3")
    assert p.returncode == 0, p.stderr
    manifest = json.loads((tmp_path / "cap/capture.json").read_text())
    assert len([t for t in manifest["tasks"] if t["file"]]) == 3 and "capture.json lists all" in " ".join(
        p.stdout.split()
    )
    assert manifest["tasks"][3]["why"] == "beyond --top 3" and manifest["measure"] == "CPU time"
    p = run("examples/llama_decode/model.py", "--out", str(tmp_path / "bad"))
    assert p.returncode == 2 and "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1


MOE = """
import torch
import torch.nn as nn


class MoE(nn.Module):
    # Top-2 of 4 experts; an expert's tokens are those a boolean mask selects.

    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(16)
        self.gate = nn.Linear(16, 4)
        self.experts = nn.ModuleList(nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 16)) for _ in range(4))

    def forward(self, x):
        flat = self.norm(x)
        w, idx = self.gate(flat).softmax(-1).topk(2, dim=-1)
        out = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):
            rows = (idx == e).any(-1)
            out[rows] += expert(flat[rows]) * (w * (idx == e)).sum(-1)[rows, None]
        return x + out


def make():
    torch.manual_seed(0)
    return MoE(), (torch.randn(12, 16),)
"""


def test_regions_at_a_count_of_the_data_are_flagged_in_the_table_capture_json_and_the_task(tmp_path: Path):
    """An MoE's per-expert tasks hold the captured forward's count of tokens routed there: said, not silent."""
    (tmp_path / "moe.py").write_text(textwrap.dedent(MOE))
    ks = Path(sys.executable).parent / "kernelsmith"
    p = subprocess.run(
        [str(ks), "capture", f"{tmp_path}/moe.py:make", "--out", str(tmp_path / "out"), "--forwards", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    said = " ".join(p.stdout.split())
    assert p.returncode == 0, p.stderr
    tasks = json.loads((tmp_path / "out/capture.json").read_text())["tasks"]
    flagged = {path: t for t in tasks if t["data_dependent"] for path in t["module_paths"]}
    assert {f"experts.{e}.1" for e in range(4)} <= set(flagged)  # each expert's GELU, at its count of tokens
    assert not any(t["data_dependent"] or t["data_dependent_why"] for t in tasks if t["module_class"] == "LayerNorm")
    why = flagged["experts.0.1"]["data_dependent_why"]
    assert "is a count of the data (from a boolean mask's selection (aten.index.Tensor) in MoE)" in why
    count = sum(t["data_dependent"] for t in tasks)
    assert f"data-dependent: {count} tasks hold a count of the data in their shapes" in said
    assert "(data-dependent)" in said
    header = (tmp_path / "out" / flagged["experts.0.1"]["file"]).read_text().split('"""')[1]
    assert f"Note: data-dependent: {why}" in " ".join(header.split())


def test_user_text_is_never_markup_and_the_switch_to_eval_is_said(tmp_path: Path):
    """`zoo.py:cat` once printed as `zoo.py🐱` (rich's emoji codes), and capture switched the model to
    eval() without a word."""
    ks = Path(sys.executable).parent / "kernelsmith"
    folder = tmp_path / "[bold]zoo"
    folder.mkdir()
    (folder / "zoo.py").write_text(textwrap.dedent(PLAIN).replace("def make():", "def cat():"))
    run = lambda *a: subprocess.run([str(ks), "capture", *a], capture_output=True, text=True, timeout=300)
    p = run(f"{folder}/zoo.py:cat", "--out", str(tmp_path / "out"), "--forwards", "2")
    out = " ".join(p.stdout.split())
    assert p.returncode == 0, p.stderr
    # the table's title wraps at the table's width, anywhere in a long path: compare without whitespace
    assert f"{folder}/zoo.py:cat:" in "".join(p.stdout.split()) and "🐱" not in out
    assert "mode: the model was in training mode; capture ran it in eval() mode" in out
    assert json.loads((tmp_path / "out/capture.json").read_text())["switched_to_eval"] is True
    p = run("nowhere/zoo.py:cat", "--out", str(tmp_path / "bad"))
    assert p.returncode == 2 and "ENTRY nowhere/zoo.py:cat: file not found" in p.stderr and "🐱" not in p.stderr


def test_a_module_entry_imports_from_the_current_folder(tmp_path: Path):
    """`kernelsmith capture block:make` in the model's own folder, as `python -m` would import it."""
    (tmp_path / "block_of_mine.py").write_text(textwrap.dedent(PLAIN))
    ks = Path(sys.executable).parent / "kernelsmith"
    p = subprocess.run(
        [str(ks), "capture", "block_of_mine:make", "--out", "out", "--forwards", "1"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "out/capture.json").is_file()


def test_a_capture_that_writes_nothing_is_an_error_and_leaves_no_folder(plain_entry: str, tmp_path: Path):
    ks = Path(sys.executable).parent / "kernelsmith"
    run = lambda *a: subprocess.run([str(ks), "capture", *a], capture_output=True, text=True, timeout=300)
    p = run(plain_entry, "--out", str(tmp_path / "none"), "--min-share", "0.99", "--forwards", "1")
    said = [line for line in p.stderr.splitlines() if not line.startswith("USDT")]  # the profiler's own
    assert p.returncode == 2 and len(said) == 1, p.stdout + p.stderr
    assert "no region reaches --min-share 0.99: the heaviest takes" in p.stderr and not (tmp_path / "none").exists()
    p = run(plain_entry.replace(":make", ":raises"), "--out", str(tmp_path / "failed"))
    assert p.returncode == 2 and "the model's forward raised RuntimeError" in p.stderr
    assert not (tmp_path / "failed").exists()
    p = run(plain_entry, "--out", str(tmp_path / "one"), "--top", "1", "--forwards", "1")
    said = " ".join(p.stdout.split())
    assert p.returncode == 0 and "1 task covering" in said and "each op's least over 1 profiled forward (" in said, (
        p.stderr
    )
    # A previous capture stays whole when a re-capture into its folder writes nothing.
    before = {f.name: f.read_text() for f in (tmp_path / "one").iterdir()}
    with pytest.raises(UserError, match="no region reaches"):
        capture(plain_entry, tmp_path / "one", min_share=0.99, forwards=1)
    assert {f.name: f.read_text() for f in (tmp_path / "one").iterdir()} == before


def test_a_region_that_reads_no_tensor_is_listed_with_why_not_written_broken(tmp_path: Path):
    """GPT-2 makes its position ids in its forward (arange, then add, unsqueeze): a region that reads no
    input and no parameter. Its task would have no device to make them on (it was written referring to a
    value before making it, and failed its own check); it is listed with the reason instead."""
    (tmp_path / "pos_model.py").write_text(
        textwrap.dedent(
            """
            import torch
            import torch.nn as nn


            class Pos(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.wpe = nn.Embedding(16, 8)

                def forward(self, x):
                    past = 0  # a cache's length, as Hugging Face's models add it
                    pos = (torch.arange(x.shape[1], device=x.device) + past).unsqueeze(0)
                    return x + self.wpe(pos).relu()


            def make():
                torch.manual_seed(0)
                return Pos(), (torch.randn(2, 16, 8),)
            """
        )
    )
    done = capture(f"{tmp_path / 'pos_model.py'}:make", tmp_path / "cap", forwards=1)
    created = [t for t in done.tasks if "arange.default" in t.ops]
    assert created and all(t.file is None for t in created)
    assert all("reads no tensor" in (t.why or "") for t in created), [t.why for t in created]
    assert all("UnboundLocalError" not in (t.why or "") for t in done.tasks)
