"""Writing a launch configuration into a candidate's code (tuner.py decides what to write): a
libcst transformer that replaces nodes by the identity of the original node, so every other byte
of the file stays as it was.
"""

from __future__ import annotations

from typing import cast

import libcst as cst

from kernelsmith.evolve import tuner_launch as launch

MASK = "__tuned__"  # what a tuned value becomes in a program's skeleton


def _expr_of(original: cst.BaseExpression, updated: cst.BaseExpression) -> cst.BaseExpression:
    """The computed part E of a scaled block, taken from `updated` at the place split_scale finds
    it in `original` (so literals edited inside E stay edited)."""
    split = launch.split_scale(original)
    assert split is not None
    if split[0] is original:
        return updated
    if isinstance(original, cst.BinaryOperation):
        return cast(cst.BinaryOperation, updated).left
    return cast(cst.BinaryOperation, cast(cst.Call, updated).args[0].value).left


class Replace(cst.CSTTransformer):
    """By identity of the original node: literals replaced, scaled blocks rebuilt, options added to
    or (for the skeleton) dropped from their launch."""

    def __init__(
        self,
        ints: dict[int, cst.BaseExpression],
        scaled: dict[int, int | None] | None = None,  # id -> scale; None: mask it
        add: dict[int, list[tuple[str, int]]] | None = None,  # id(call) -> keywords to append
        drop: set[int] | None = None,  # ids of option arguments to leave out
    ) -> None:
        self.ints, self.scaled, self.add, self.drop = ints, scaled or {}, add or {}, drop or set()

    def on_leave(self, original_node, updated_node):  # type: ignore[override]
        key = id(original_node)
        if key in self.ints:
            return self.ints[key]
        if key in self.scaled:
            expr = _expr_of(original_node, updated_node)
            scale = self.scaled[key]
            if scale is None:
                return cst.Call(cst.Name(MASK), [cst.Arg(expr)])
            return launch.render_scaled(expr, scale)
        if isinstance(original_node, cst.Call) and (key in self.add or self.drop):
            args = [u for o, u in zip(original_node.args, updated_node.args) if id(o) not in self.drop]
            extra = self.add.get(key, [])
            if extra:
                space = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
                if args and args[-1].comma is cst.MaybeSentinel.DEFAULT:
                    args[-1] = args[-1].with_changes(comma=space)
                for i, (kw, value) in enumerate(extra):
                    arg = cst.Arg(
                        cst.Integer(str(value)),
                        keyword=cst.Name(kw),
                        equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
                        comma=space if i < len(extra) - 1 else cst.MaybeSentinel.DEFAULT,
                    )
                    args.append(arg)
            return updated_node.with_changes(args=args)
        return updated_node
