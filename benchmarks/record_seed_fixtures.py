"""Record Inductor's CUDA output code for the seed fixtures (tests/cases/seed/NAME/task.py) on a
machine WITHOUT a GPU: Inductor generates its code for device "cuda" from fake tensors, with the
CUDA device and Triton's driver faked (an H200's properties, compute capability 9.0).

What is real: the output code is what the installed Inductor's code generation writes for a CUDA
device at the task's shapes (kernels, fusion, extern GEMM calls, the wrapper). What is not: no
kernel was compiled or run, so nothing was autotuned; each kernel's launch config is the first of
the configs its heuristics offer (record.json says so per kernel, in `chosen_by`). Inductor's
attention-pattern and misc pattern passes are registered with CPU example tensors (they build real
tensors at registration, which a fake CUDA device cannot), a convolution's output layout is
cuDNN's rule as written below (the CPU build's C++ answers for a backend without cuDNN), the Model is
traced under the fake mode, and `Tensor.copy_` skips its Python binding's CUDA device guard.
On a GPU, `kernelsmith seed --record DIR` records the real thing (benchmarks/device/seed.sh).

A fixture whose name ends in `_templates` is recorded as the seed step's second try compiles it
(Inductor's Triton templates forced, kernelsmith/seed/inductor.py's TRITON_TEMPLATES); where Inductor
would benchmark its choices (max-autotune), it is given only the first (record.json says so).

Usage: python benchmarks/record_seed_fixtures.py [NAME ...]   (default: every tests/cases/seed/*/)
"""

from __future__ import annotations

import importlib.util
import sys
import tempfile
import types
from pathlib import Path
from unittest import mock

import torch
import triton
from torch._inductor import config
from torch._inductor.compile_fx import compile_fx
from torch._inductor.graph import GraphLowering
from torch._inductor.select_algorithm import AlgorithmSelectorCache
from triton.backends.compiler import GPUTarget
from triton.backends.nvidia.driver import CudaDriver
from triton.runtime import driver as triton_driver

from kernelsmith.seed.inductor import TEMPLATES_SAID, inductor_options, model_and_inputs, trace_flat
from kernelsmith.seed.parse import parse_output_code
from kernelsmith.seed.record import InductorRecord, LaunchConfig
from kernelsmith.task import Task

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "cases" / "seed"
TEMPLATES_SUFFIX = "_templates"  # a fixture recorded as the seed's second try: Inductor's Triton templates forced
H200 = types.SimpleNamespace(
    name="NVIDIA H200 (faked)", major=9, minor=0, multi_processor_count=132, total_memory=141 * 2**30,
    max_threads_per_multi_processor=2048, warp_size=32, regs_per_multiprocessor=65536, max_threads_per_block=1024,
    shared_memory_per_block_optin=232448, shared_memory_per_multiprocessor=233472, L2_cache_size=50 * 2**20,
    gcnArchName="", clock_rate=1980000, memory_clock_rate=3201000, memory_bus_width=6144,
)  # fmt: skip


class FakeCudaDriver(CudaDriver):
    """Triton's CUDA driver answering for a Hopper GPU that is not there (code generation only)."""

    def __init__(self):
        self.utils, self.launcher_cls = None, None

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0

    def get_device_capability(self, device=None):
        return (9, 0)

    def get_current_target(self):
        return GPUTarget("cuda", 90, 32)


def cudnn_memory_format(input_, weight, backend):
    """cuDNN's choice (cudnn_conv_suggest_memory_format): channels-last when the input or the weight
    is; a CPU build of torch, with no cuDNN, would answer for another backend."""
    from torch._prims_common import suggest_memory_format

    last = {4: torch.channels_last, 5: torch.channels_last_3d}.get(input_.dim())
    if last is not None and last in (suggest_memory_format(input_), suggest_memory_format(weight)):
        return last
    return torch.contiguous_format


def aten_copy(self, src, non_blocking=False):
    return torch.ops.aten.copy_.default(self, src, non_blocking)


class CodegenDone(Exception):
    """Raised where Inductor would load (and compile) the module it just wrote."""


def stop_at_output(codes: list[str]):
    """PyCodeCache.load_by_key_path, raising CodegenDone once the output code is written (`codes`); the
    modules of template kernels that max-autotune writes before it are loaded (nothing compiles at load)."""
    from torch._inductor.codecache import PyCodeCache

    load = PyCodeCache.load_by_key_path

    def load_unless_output(*args, **kwargs):
        if codes:
            raise CodegenDone
        return load(*args, **kwargs)

    return mock.patch.object(PyCodeCache, "load_by_key_path", load_unless_output)


def fake_cuda() -> list:
    import torch._inductor.fx_passes.joint_graph as joint_graph

    triton_driver.set_active(FakeCudaDriver())
    lazy_init = joint_graph.lazy_init
    return [
        mock.patch("torch.cuda.is_available", lambda: True),
        mock.patch("torch.cuda.device_count", lambda: 1),
        mock.patch("torch.cuda.current_device", lambda: 0),
        mock.patch("torch.cuda.get_device_properties", lambda *a, **k: H200),
        mock.patch("torch.cuda._get_device_properties", lambda *a, **k: H200, create=True),
        mock.patch("torch.cuda.get_device_capability", lambda *a, **k: (9, 0)),
        mock.patch("torch.cuda.get_device_name", lambda *a, **k: H200.name),
        mock.patch("torch.cuda.get_rng_state", lambda *a, **k: torch.zeros(16, dtype=torch.uint8)),
        mock.patch("torch.cuda.set_rng_state", lambda *a, **k: None),
        mock.patch("torch.cuda.manual_seed_all", lambda *a, **k: None),
        mock.patch("torch.cuda.manual_seed", lambda *a, **k: None),
        mock.patch("torch.cuda._lazy_init", lambda *a, **k: None),
        mock.patch("torch.cuda._exchange_device", lambda *a, **k: 0),
        mock.patch("torch.cuda._maybe_exchange_device", lambda *a, **k: 0),
        mock.patch("torch.cuda.set_device", lambda *a, **k: None),
        mock.patch("torch.cuda.synchronize", lambda *a, **k: None),
        mock.patch.object(joint_graph, "lazy_init", lambda input_device=None, **k: lazy_init(torch.device("cpu"), **k)),
        mock.patch("torch._C._conv_determine_backend_memory_format", cudnn_memory_format),
        # Tensor.copy_'s Python binding takes a CUDA device guard, which a CPU build lacks (a decomposition's
        # in-place update of a fake CUDA tensor, e.g. BatchNorm's running statistics); the op itself does not
        mock.patch.object(torch.Tensor, "copy_", aten_copy),
    ]


def heuristic_launches(code: str, template_choices: list[int]) -> dict[str, LaunchConfig]:
    """Each kernel's configs as its heuristics offer them (its source executed, nothing compiled): the first.
    A template kernel (triton_tem_*) has one config: the first of its selection's choices (`template_choices`)."""
    launches = {}
    for name, source in parse_output_code(code).kernels.items():
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / f"{name}.py"
            path.write_text(source)
            spec = importlib.util.spec_from_file_location(f"ks_fixture_{name}", path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        configs = getattr(module, name).configs
        c = configs[0]
        how = "its only" if len(configs) == 1 else f"first of {len(configs)} heuristic configs: no GPU ran them"
        if name.startswith("triton_tem_"):
            offered = f"{template_choices[0]} " if len(template_choices) == 1 else ""
            how = f"first of the {offered}template choices Inductor offered: no GPU ran them"
        launches[name] = LaunchConfig(dict(c.kwargs), int(c.num_warps), int(c.num_stages), how)
    return launches


def make_fx_under(mode):
    """make_fx whose tracing runs under the fake mode: a tensor the forward makes on "cuda" (BatchNorm's
    empty one) is a fake one too; what the trace keeps is read after it, outside the mode."""
    from torch.fx.experimental.proxy_tensor import make_fx

    def traced(f):
        def run(*args):
            with mode:
                return make_fx(f)(*args)

        return run

    return traced


def first_choice(counts: list[int]):
    """Inductor's algorithm selection (max-autotune) given only the first of its choices: the one taken
    without benchmarking, which a faked GPU cannot do. How many there were goes to `counts`."""
    select = AlgorithmSelectorCache.__call__

    def call(self, name, choices, *args, **kwargs):
        counts.append(len(choices))
        return select(self, name, choices[:1], *args, **kwargs)

    return call


def record(task: Task, templates: bool) -> InductorRecord:
    """Inductor's default code for the task, or (`templates`) its code with its Triton templates forced,
    as the seed step's second try compiles it."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    model, inputs = model_and_inputs(task, "cpu")  # then each tensor made a fake one of its kind on "cuda"
    mode = FakeTensorMode(allow_non_fake_inputs=True)  # a tensor the forward makes (torch.tensor(c)) is real

    def on_fake_cuda(t):
        if not isinstance(t, torch.Tensor):
            return t
        with mode:
            return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="cuda")

    model = model._apply(on_fake_cuda)
    inputs = [on_fake_cuda(x) for x in inputs]
    with mock.patch("torch.fx.experimental.proxy_tensor.make_fx", make_fx_under(mode)):
        flat = trace_flat(model, inputs)
    codes: list[str] = []
    counts: list[int] = []
    options = config.patch(inductor_options(templates))
    first = mock.patch.object(AlgorithmSelectorCache, "__call__", first_choice(counts))
    saved = mock.patch.object(GraphLowering, "save_output_code", codes.append)
    with saved, stop_at_output(codes), options, first, torch.no_grad():
        try:
            compile_fx(flat.graph, flat.args)
        except Exception as exc:  # Inductor wraps CodegenDone in its own error
            if "CodegenDone" not in repr(exc) or len(codes) != 1:
                raise
    provenance = {
        "torch": torch.__version__,
        "triton": triton.__version__,
        "device": H200.name,
        "how": "benchmarks/record_seed_fixtures.py: Inductor codegen for a faked CUDA device; nothing compiled or run"
        + (f" ({TEMPLATES_SAID})" if templates else ""),
    }
    return InductorRecord(codes[0], heuristic_launches(codes[0], counts), flat.state, flat.tensor_inputs,
                          flat.single_output, provenance, training=flat.training)  # fmt: skip


def main(names: list[str]) -> None:
    for p in fake_cuda():
        p.start()
    dirs = [FIXTURES / n for n in names] if names else sorted(p.parent for p in FIXTURES.glob("*/task.py"))
    for d in dirs:
        rec = record(Task.from_file(d / "task.py", name=d.name), d.name.endswith(TEMPLATES_SUFFIX))
        rec.save(d)
        print(f"{d.name}: {len(rec.launches)} Triton kernels, {rec.output_code.count('extern_kernels.')} extern calls")


if __name__ == "__main__":
    main(sys.argv[1:])
