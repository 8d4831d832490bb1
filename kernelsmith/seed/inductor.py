"""Running Inductor on a task: its output code for the task's Model at the task's shapes, and the
launch configs its kernels ran with.

The Model is traced as one flat function of its parameters, buffers and tensor inputs
(make_fx over torch.func.functional_call), so the order of `call(args)` is known, and compiled by
Inductor's own entry (compile_fx) without autograd, as torch.compile compiles inference. Compiled and
run at the evaluation's precision (kernelsmith.evaluate.runtime.PRECISION), which the judge's reference
runs at: Inductor bakes the TF32 flags into its templates, and its library calls read them at run time.
"""

from __future__ import annotations

import tempfile
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import cast
from unittest import mock

import torch

from kernelsmith.errors import one_line
from kernelsmith.evaluate.runtime import build_model, evaluation_precision, make_inputs, precision_flags
from kernelsmith.seed.errors import SeedError
from kernelsmith.seed.record import InductorRecord, LaunchConfig
from kernelsmith.task import Task, load_module


@dataclass
class FlatGraph:
    """The Model as one function of flat tensors: `state` (parameter and buffer names) then `tensor_inputs`."""

    graph: torch.fx.GraphModule
    args: list[torch.Tensor]
    state: tuple[str, ...]
    tensor_inputs: tuple[int, ...]
    single_output: bool
    training: bool | None  # the mode it was traced in, where the Model's graph depends on it (else None)


def model_and_inputs(task: Task, device: str) -> tuple[torch.nn.Module, list]:
    """The task's Model and inputs, built as the evaluator builds them (seed 0), on `device`."""
    with tempfile.TemporaryDirectory(prefix="ks-seed-") as tmp:
        try:
            module = load_module(task.source, Path(tmp) / "task.py", f"ks_seed_task_{task.hash[:12]}")
            model = build_model(module.Model, module, 0, device)
            inputs = make_inputs(module, 0, device)
        except Exception as exc:
            raise SeedError(f"building the task's Model and inputs failed: {one_line(repr(exc), 200)}") from None
    if not isinstance(model, torch.nn.Module):
        raise SeedError("the task's Model(...) is not a torch.nn.Module")
    return model, inputs


def trace_flat(model: torch.nn.Module, inputs: list) -> FlatGraph:
    """`model` traced as a flat function in the mode it is in (as built: training mode, as the evaluator
    runs it); inputs that are not tensors become constants of the graph."""
    names = tuple(n for n, _ in model.named_parameters()) + tuple(n for n, _ in model.named_buffers())
    state = [t.detach() for t in (*model.parameters(), *model.buffers())]
    positions = tuple(i for i, x in enumerate(inputs) if isinstance(x, torch.Tensor))
    single: list[bool] = []

    def flat_forward(*flat):
        args = list(inputs)
        for j, i in enumerate(positions):
            args[i] = flat[len(names) + j]
        out = torch.func.functional_call(model, dict(zip(names, flat[: len(names)])), tuple(args))
        tensors = isinstance(out, (tuple, list)) and all(isinstance(o, torch.Tensor) for o in out)
        if not (isinstance(out, torch.Tensor) or tensors):
            raise SeedError("the Model returns something other than a tensor or a tuple of tensors")
        single.append(isinstance(out, torch.Tensor))
        return out

    args = [*state, *(inputs[i] for i in positions)]
    graph = _make_fx(flat_forward, args)
    training = model.training if _mode_matters(model, graph, lambda: _make_fx(flat_forward, args)) else None
    _inline_tensor_constants(graph)
    return FlatGraph(graph, args, names, positions, single[0], training)


def _make_fx(function: Callable[..., object], args: list) -> torch.fx.GraphModule:
    from torch.fx.experimental.proxy_tensor import make_fx

    try:
        with torch.no_grad():
            return make_fx(function)(*args)
    except SeedError:
        raise
    except Exception as exc:
        raise SeedError(f"tracing the Model failed: {one_line(repr(exc), 200)}") from None


def _mode_matters(
    model: torch.nn.Module, graph: torch.fx.GraphModule, trace: Callable[[], torch.fx.GraphModule]
) -> bool:
    """Whether the Model's graph in the other mode (each module's `training` flipped) differs from `graph`
    (BatchNorm, Dropout, a forward that reads self.training): the seed is then for this mode only. A trace
    that fails in the other mode counts as different."""
    modes = {m: m.training for m in model.modules()}
    try:
        for m, training in modes.items():
            m.training = not training
        return trace().code != graph.code
    except SeedError:
        return True
    finally:
        for m, training in modes.items():
            m.training = training


def _inline_tensor_constants(graph: torch.fx.GraphModule) -> None:
    """A tensor the forward makes from a number (`torch.min(x, torch.tensor(c))`) or keeps as a plain
    attribute is a constant of the traced graph (a `get_attr` of `_tensor_constantN`, a buffer of the
    graph module), which compile_fx would lift to an extra leading argument of `call(args)` that the
    seed does not pass. A one-element one becomes a `full` node of its value, dtype and device, which
    Inductor folds into its kernels; a larger one is no seed."""
    constants: set[str] = set()
    for node in list(graph.graph.nodes):
        if node.op != "get_attr":
            continue
        value = _attr(graph, str(node.target))
        if not isinstance(value, torch.Tensor):
            continue
        if value.numel() != 1:
            raise SeedError(
                f"the Model's forward uses a tensor of shape {tuple(value.shape)} that is neither a parameter, "
                "a buffer nor an input (a constant of the traced graph): not supported"
            )
        with graph.graph.inserting_before(node):
            full = graph.graph.call_function(
                torch.ops.aten.full.default,
                (list(value.shape), value.item()),
                {"dtype": value.dtype, "layout": torch.strided, "device": value.device, "pin_memory": False},
            )
        node.replace_all_uses_with(full)
        graph.graph.erase_node(node)
        constants.add(str(node.target))
    for target in constants:  # compile_fx lifts every buffer of the graph module, used or not
        owner, _, name = target.rpartition(".")
        delattr(_attr(graph, owner) if owner else graph, name)
    graph.recompile()


def _attr(graph: torch.fx.GraphModule, target: str) -> object:
    value: object = graph
    for part in target.split("."):
        value = getattr(value, part)
    return value


# The seed's second try, where Inductor's default code is library calls only (a plain GEMM or convolution):
# max-autotune with Triton's templates as the only GEMM and convolution backends, so that a template, not
# cuBLAS or cuDNN, does the work (with ATen among them, max-autotune's code for issue 41's GEMMs on the H200
# was library calls again). Options of torch._inductor.config in torch 2.11 and 2.13 alike.
TRITON_TEMPLATES = {
    "max_autotune": True,
    "max_autotune_gemm_backends": "TRITON",
    "max_autotune_conv_backends": "TRITON",
}
TEMPLATES_SAID = ", ".join(f"{k}={v!r}" for k, v in TRITON_TEMPLATES.items())


def inductor_options(templates: bool) -> dict:
    """Inductor's config for a seed: torch.compile's default mode (or its Triton templates forced), a
    Python wrapper, no CUDA graphs, and no FX graph cache: its key leaves cuDNN's TF32 flag out (torch
    2.13's codecache), so a graph compiled elsewhere with TF32 convolution templates could come back."""
    options = {"cpp_wrapper": False, "triton.cudagraphs": False, "fx_graph_cache": False}
    return {**options, **(TRITON_TEMPLATES if templates else {})}


def inductor_code(flat: FlatGraph, templates: bool = False) -> tuple[Callable[..., object], str]:
    """Inductor's compiled function and its output code (Python wrapper) for `flat`."""
    from torch._inductor import config
    from torch._inductor.compile_fx import compile_fx
    from torch._inductor.graph import GraphLowering

    codes: list[str] = []
    try:
        with (
            mock.patch.object(GraphLowering, "save_output_code", codes.append),
            config.patch(inductor_options(templates)),
            evaluation_precision(),
        ):
            with torch.no_grad():
                compiled = compile_fx(flat.graph, flat.args)
    except Exception as exc:
        said = one_line(str(exc) or repr(exc), 200)
        if templates and "No choices to select" in said:  # select_algorithm's NoValidChoicesError, ATen left out
            raise SeedError(
                "Inductor has no Triton template for a library call of the task (it has them for GEMMs and for "
                "2-D and 3-D convolutions, not transposed, not dilated)"
            ) from None
        raise SeedError(f"Inductor could not compile the task: {said}") from None
    if len(codes) != 1:
        raise SeedError(f"Inductor wrote {len(codes)} output codes for the task, not one")
    return cast(Callable[..., object], compiled), codes[0]


def _loaded_module(code: str) -> types.ModuleType:
    from torch._inductor.codecache import PyCodeCache

    for mod in [*PyCodeCache.modules, *PyCodeCache.modules_no_attr.values()]:
        path = getattr(mod, "__file__", None)
        if path and Path(path).is_file() and Path(path).read_text(encoding="utf-8") == code:
            return mod
    raise SeedError("Inductor's compiled module was not found after the run: its launch configs cannot be read")


def chosen_launches(code: str, device_name: str) -> dict[str, LaunchConfig]:
    """The config each Triton kernel of the compiled `code` ran with, after one run (autotuned ones
    keep their winner alone)."""
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    launches: dict[str, LaunchConfig] = {}
    for name, kernel in vars(_loaded_module(code)).items():
        if not isinstance(kernel, CachingAutotuner):
            continue
        offered = list(kernel.configs or ())
        configs = [launcher.config for launcher in kernel.launchers] or offered
        if len(configs) == 1:
            how = f"autotuned on {device_name} among {len(offered)}" if len(offered) > 1 else "its only"
        else:
            how = f"first of {len(configs)}: the kernel did not run, nothing chose"
        c = configs[0]
        launches[name] = LaunchConfig(dict(c.kwargs), int(c.num_warps), int(c.num_stages), how)
    return launches


def record_task(task: Task, templates: bool = False) -> InductorRecord:
    """Compile the task with Inductor on the GPU, run it once, and record its code and launches."""
    try:
        import triton
    except ImportError:
        raise SeedError("seed needs Triton (Inductor's code generator for the GPU), and it is not installed") from None

    with evaluation_precision():  # the compile, and the run whose autotuning picks each kernel's config
        model, inputs = model_and_inputs(task, "cuda")
        flat = trace_flat(model, inputs)
        compiled, code = inductor_code(flat, templates)
        try:
            with torch.no_grad():
                compiled(*flat.args)
            torch.cuda.synchronize()
        except Exception as exc:
            said = one_line(str(exc) or repr(exc), 200)
            raise SeedError(f"Inductor's compiled code failed to run: {said}") from None
        precision = ", ".join(f"{k}={v}" for k, v in precision_flags().items())
    device_name = torch.cuda.get_device_name()
    provenance = {
        "torch": torch.__version__,
        "triton": triton.__version__,
        "device": device_name,
        "how": "kernelsmith seed: compile_fx of the traced Model" + (f" ({TEMPLATES_SAID})" if templates else ""),
        "precision": precision,
    }
    launches = chosen_launches(code, device_name)
    state, inputs_at = flat.state, flat.tensor_inputs
    return InductorRecord(code, launches, state, inputs_at, flat.single_output, provenance, training=flat.training)
