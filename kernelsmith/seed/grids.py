"""The grid of a launch, written out: Inductor's grid types (runtime/triton_heuristics.py, GridExpr
and its subclasses) as `triton.cdiv(numel, BLOCK)` over the launch's own arguments.

The block in the grid is the same literal as the launch's keyword, so a tuner that edits one edits
both (evolve/tuner_analysis.py pairs an inline grid literal with an equal keyword).
"""

from __future__ import annotations

import libcst as cst

from kernelsmith.seed.errors import SeedError
from kernelsmith.seed.kernels import SeedKernel

MAX_Y_GRID = 65535  # CUDA's limit on gridDim.y and gridDim.z

# grid type -> per axis (numel parameter, block keyword); Grid2DWithYZOverflow is Grid2D while
# its y axis fits (checked below). FixedGrid's axes are launch arguments of their own.
AXES: dict[str, tuple[tuple[str, str], ...]] = {
    "Grid1D": (("xnumel", "XBLOCK"),),
    "Grid2D": (("xnumel", "XBLOCK"), ("ynumel", "YBLOCK")),
    "Grid2DWithYZOverflow": (("xnumel", "XBLOCK"), ("ynumel", "YBLOCK")),
    "Grid3D": (("xnumel", "XBLOCK"), ("ynumel", "YBLOCK"), ("znumel", "ZBLOCK")),
    "BatchMatmulGrid3D": (("znumel", "ZBLOCK"), ("ynumel", "YBLOCK"), ("xnumel", "XBLOCK")),
    "SplitScanGrid": (("r0_numel", "R0_BLOCK"), ("xnumel", "")),
    "MixOrderReductionGrid": (("xnumel", "RSPLIT_SIZE"),),
}


def _cdiv(numel: cst.BaseExpression, block: int | None) -> cst.BaseExpression:
    if block is None:
        return numel
    func = cst.Attribute(value=cst.Name("triton"), attr=cst.Name("cdiv"))
    return cst.Call(func=func, args=[cst.Arg(numel), cst.Arg(cst.Integer(str(block)))])


def _int_value(node: cst.BaseExpression) -> int | None:
    return int(node.evaluated_value) if isinstance(node, cst.Integer) else None


def grid(kernel: SeedKernel, args: list[cst.BaseExpression], blocks: dict[str, int]) -> cst.Tuple:
    """The grid of `kernel` launched with positional `args` (kernel arguments, then any grid
    arguments) and config `blocks` (its kwargs: XBLOCK, R0_BLOCK, RSPLIT, ...)."""
    if kernel.grid_type == "FixedGrid":
        axes = args[len(args) - kernel.fixed_grid_args :]
    elif kernel.grid_type == "CooperativeReductionGrid":
        if "RSPLIT" not in blocks:
            raise SeedError(f"kernel {kernel.name}: a cooperative reduction without RSPLIT in its config")
        axes = [cst.Integer(str(blocks["RSPLIT"])), _cdiv(_numel(kernel, args, "xnumel"), blocks.get("XBLOCK"))]
    elif kernel.grid_type in AXES:
        axes = [_cdiv(_numel(kernel, args, n), blocks.get(b)) for n, b in AXES[kernel.grid_type]]
    else:
        raise SeedError(f"kernel {kernel.name}: Inductor's grid type {kernel.grid_type} is not supported")
    if kernel.grid_type == "Grid2DWithYZOverflow":
        y = _int_value(_numel(kernel, args, "ynumel"))
        if y is None or -(-y // blocks.get("YBLOCK", 1)) > MAX_Y_GRID:
            raise SeedError(f"kernel {kernel.name}: its y grid may overflow CUDA's limit (Grid2DWithYZOverflow)")
    return cst.Tuple([cst.Element(a) for a in axes])


def _numel(kernel: SeedKernel, args: list[cst.BaseExpression], param: str) -> cst.BaseExpression:
    if param not in kernel.params:
        raise SeedError(f"kernel {kernel.name}: its {kernel.grid_type} grid needs {param}, not a parameter of it")
    i = kernel.params.index(param)
    if i >= len(args) - kernel.fixed_grid_args:
        raise SeedError(f"kernel {kernel.name}: its launch passes no {param}")
    return args[i]
