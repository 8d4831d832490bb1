"""Inductor's `call(args)` made a plain function: launches of its Triton kernels become
`kernel[grid](..., XBLOCK=..., num_warps=..., num_stages=...)`, its library calls (extern_kernels.*)
the torch functions they stand for, its device allocations follow the inputs' device, and its
CUDA stream and device-guard plumbing goes (a plain launch runs on the current stream)."""

from __future__ import annotations

from collections.abc import Mapping

import libcst as cst
import libcst.matchers as m

from kernelsmith.seed.errors import SeedError
from kernelsmith.seed.grids import grid
from kernelsmith.seed.kernels import SeedKernel
from kernelsmith.seed.record import LaunchConfig

# extern_kernels.NAME -> the library call it stands for (torch/_inductor/kernel/*.py, ExternKernelChoice).
# bias_addmm is torch.addmm with a broadcast bias row (Inductor passes it as inp[0] for cuBLAS's epilogue).
EXTERN_CALLS = {
    "mm": "torch.mm",
    "bmm": "torch.bmm",
    "addmm": "torch.addmm",
    "bias_addmm": "torch.addmm",
    "baddbmm": "torch.baddbmm",
    "convolution": "torch.convolution",
    "_int_mm": "torch._int_mm",
    "_scaled_mm": "torch._scaled_mm",
}
# Names the rewritten call may no longer mention: each is Inductor's runtime, not a library.
RUNTIME_NAMES = ("get_raw_stream", "extern_kernels", "empty_strided_cuda", "async_compile")
_EQUAL = cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace(""))
DEVICE = "buffers_device"  # the parameter the rewritten call takes: where its buffers go


def _dotted(name: str) -> cst.BaseExpression:
    return cst.parse_expression(name)


class _CallRewriter(cst.CSTTransformer):
    def __init__(self, kernels: Mapping[str, SeedKernel], launches: Mapping[str, LaunchConfig]):
        self.kernels, self.launches = kernels, launches
        self.launched: list[str] = []

    def leave_With(self, original_node: cst.With, updated_node: cst.With):
        cuda = m.Attribute(value=m.Name("torch"), attr=m.Name("cuda"))
        guard = m.Call(func=m.Attribute(value=cuda, attr=m.Name("_DeviceGuard") | m.Name("device")))
        if all(m.matches(item.item, guard) for item in updated_node.items):  # torch.cuda._DeviceGuard(0)
            return cst.FlattenSentinel(cst.ensure_type(updated_node.body, cst.IndentedBlock).body)
        return updated_node

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock):
        """Drop `torch.cuda.set_device(0)` and `raw_stream0 = get_raw_stream(0)`; their comments stay."""
        set_device = m.Expr(
            value=m.Call(func=m.Attribute(value=m.Attribute(attr=m.Name("cuda")), attr=m.Name("set_device")))
        )
        stream = m.Assign(value=m.Call(func=m.Name("get_raw_stream")))
        body: list[cst.SimpleStatementLine | cst.BaseCompoundStatement] = []
        comments: list[cst.EmptyLine] = []
        for stmt in updated_node.body:
            if not isinstance(stmt, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                raise SeedError("Inductor's call(args) holds a statement kernelsmith does not know")
            if isinstance(stmt, cst.SimpleStatementLine) and all(m.matches(s, set_device | stream) for s in stmt.body):
                comments += stmt.leading_lines
                continue
            body.append(stmt.with_changes(leading_lines=[*comments, *stmt.leading_lines]) if comments else stmt)
            comments = []
        return updated_node.with_changes(body=body)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        func = updated_node.func
        if m.matches(func, m.Attribute(value=m.Name(), attr=m.Name("run"))):
            return self._launch(
                cst.ensure_type(cst.ensure_type(func, cst.Attribute).value, cst.Name).value, updated_node
            )
        if m.matches(func, m.Attribute(value=m.Name("extern_kernels"))):
            name = cst.ensure_type(func, cst.Attribute).attr.value
            if name not in EXTERN_CALLS:
                raise SeedError(
                    f"Inductor's code calls extern_kernels.{name}, a library call kernelsmith does not know"
                )
            return updated_node.with_changes(func=_dotted(EXTERN_CALLS[name]))
        if m.matches(func, m.Name("empty_strided_cuda")):
            args = list(updated_node.args)
            if len(args) != 3 or any(a.keyword for a in args):
                raise SeedError("Inductor's code calls empty_strided_cuda other than (size, stride, dtype)")
            dtype = args[2].with_changes(keyword=cst.Name("dtype"), equal=_EQUAL)
            device = cst.Arg(cst.Name(DEVICE), keyword=cst.Name("device"), equal=_EQUAL)
            return cst.Call(_dotted("torch.empty_strided"), args=[args[0], args[1], dtype, device])
        return updated_node

    def _launch(self, name: str, call: cst.Call) -> cst.Call:
        if name not in self.kernels:
            raise SeedError(f"Inductor's code runs {name}, which is not one of its Triton kernels")
        if name not in self.launches:
            raise SeedError(f"kernel {name}: no launch config was recorded for it")
        kernel, config = self.kernels[name], self.launches[name]
        positional = [a.value for a in call.args if a.keyword is None and not a.star]
        keywords = [a.keyword.value for a in call.args if a.keyword is not None]
        if len(positional) + len(keywords) != len(call.args) or set(keywords) - {"stream"}:
            raise SeedError(f"kernel {name}: Inductor launches it with arguments other than positional and stream=")
        launch_grid = grid(kernel, positional, config.kwargs)
        kernel_args = positional[: len(positional) - kernel.fixed_grid_args]
        options = {**config.kwargs, "num_warps": config.num_warps, "num_stages": config.num_stages}
        args = [cst.Arg(a) for a in kernel_args] + [
            cst.Arg(cst.Integer(str(v)), keyword=cst.Name(k), equal=_EQUAL) for k, v in options.items()
        ]
        self.launched.append(name)
        return cst.Call(cst.Subscript(cst.Name(name), [cst.SubscriptElement(cst.Index(launch_grid))]), args)


def rewrite_call(
    call: cst.FunctionDef, kernels: Mapping[str, SeedKernel], launches: Mapping[str, LaunchConfig]
) -> tuple[cst.FunctionDef, list[str]]:
    """`call` as `def call(args, device)` with plain launches, and the kernels it launches in order."""
    rewriter = _CallRewriter(kernels, launches)
    body = cst.ensure_type(call.body.visit(rewriter), cst.BaseSuite)
    for name in RUNTIME_NAMES:
        if m.findall(body, m.Name(name)):
            raise SeedError(f"Inductor's call(args) still uses {name} where kernelsmith cannot replace it")
    if m.findall(body, m.Attribute(value=m.Attribute(value=m.Name("torch"), attr=m.Name("cuda")))):
        raise SeedError("Inductor's call(args) uses torch.cuda beyond its device guard")
    params = call.params.with_changes(params=[*call.params.params, cst.Param(cst.Name(DEVICE))])
    return call.with_changes(body=body, params=params), rewriter.launched
