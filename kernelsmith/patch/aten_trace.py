"""A graph of torch calls (as TorchDynamo hands it to a backend) traced down to aten ops, as a region's
own graph is made (make_fx with Inductor's decompositions and its no-op removal: graph_match.py), with
each aten op's torch call noted, so that eager_graph.py can replace a region's aten ops by a kernel's
call and keep every other torch call whole. Torch only: `kernelsmith apply` copies this file into the
patch it writes."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

import torch
import torch.fx as fx
from torch._subclasses.fake_tensor import FakeTensor


class Traced:
    """A Dynamo graph traced to aten ops: `aten`, each aten node's torch node (`origin`, by name), and
    each torch node's value as aten nodes (`value`: a node, a list of them, or None)."""

    def __init__(self, gm: fx.GraphModule):
        from torch._dispatch.python import enable_python_dispatcher
        from torch._inductor.decomposition import select_decomp_table
        from torch.fx.experimental.proxy_tensor import make_fx

        self.origin: dict[fx.Node, str] = {}
        self.value: dict[str, Any] = {}
        inputs = [p.meta.get("example_value") for p in gm.graph.find_nodes(op="placeholder")]
        recorder = _Recorder(gm, self)
        # The inputs' fake mode (Dynamo's): tensors a decomposition makes are its fakes too.
        fake = next((x.fake_mode for x in inputs if isinstance(x, FakeTensor)), None)
        with enable_python_dispatcher(), fake if fake is not None else nullcontext():
            self.aten = make_fx(recorder.run, select_decomp_table(), tracing_mode="real")(*inputs)
        # A decomposition may trace work it then drops (Inductor's mm upcasts a bf16 operand to float32,
        # then returns NotImplemented): a call that runs as its aten ops must not run that dead work (seen
        # on an H100: every split bf16 linear copied its weight to float32, 2.5x the step's device time).
        self.aten.graph.eliminate_dead_code()
        self._remove_noops()

    def _remove_noops(self) -> None:
        """Inductor's no-op removal, as the region's graph had it; a value a removed node held is its
        source's now."""
        from torch._inductor.fx_passes.post_grad import noop_registry, remove_noop_ops

        source: dict[fx.Node, Any] = {}
        for node in self.aten.graph.nodes:
            if node.target in noop_registry:
                index = noop_registry[node.target][1]
                source[node] = node.args[index] if isinstance(index, int) else index(node.args)
        remove_noop_ops(self.aten.graph)

        def alive(node):
            while isinstance(node, fx.Node) and getattr(node, "_erased", False):
                node = source.get(node)
            return node

        self.value = {k: ([alive(x) for x in v] if isinstance(v, list) else alive(v)) for k, v in self.value.items()}


class _Recorder(fx.Interpreter):
    """Runs the torch graph under make_fx, noting which aten nodes each torch node made and its value."""

    def __init__(self, gm: fx.GraphModule, traced: Traced):
        super().__init__(gm)
        self.traced = traced

    def run_node(self, n: fx.Node) -> Any:
        from torch.fx.experimental.proxy_tensor import get_innermost_proxy_mode, get_proxy_slot

        tracer = get_innermost_proxy_mode().tracer  # pyright: ignore[reportOptionalMemberAccess]
        before = set(tracer.graph.nodes)
        result = super().run_node(n)
        for made in tracer.graph.nodes:
            if made not in before:
                self.traced.origin[made] = n.name

        def node_of(x):
            if isinstance(x, torch.Tensor):
                slot = get_proxy_slot(x, tracer, None)
                return slot.proxy.node if slot is not None else None  # pyright: ignore[reportAttributeAccessIssue]
            return None

        if isinstance(result, (tuple, list)):
            self.traced.value[n.name] = [node_of(x) for x in result]
        else:
            self.traced.value[n.name] = node_of(result)
        return result
