"""One normalisation of Python source for "is this the same program": the syntax tree, not the text.

Two sources are equal when their ASTs are: comments, blank lines, indentation width, line breaks
inside brackets, quote style, redundant parentheses and docstrings do not count. Source that does
not parse falls back to `kernelsmith.evolve.program.normalized_code` (comments and blank lines
dropped), so a broken program still has a stable identity.
"""

from __future__ import annotations

import ast
import hashlib

from kernelsmith.evolve.program import normalized_code

_WITH_DOCSTRING = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def _drop_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if not isinstance(node, _WITH_DOCSTRING) or not node.body:
            continue
        first = node.body[0]
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            node.body = node.body[1:] or [ast.Pass()]
    return tree


def normalized_source(source: str) -> str:
    """`ast.dump` of the source without docstrings (no line numbers); the text fallback on a syntax error."""
    source = source.lstrip("\ufeff")
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):  # ValueError: a NUL byte in the source
        return "text:" + normalized_code(source)
    return ast.dump(_drop_docstrings(tree))


def source_hash(source: str) -> str:
    return hashlib.sha256(normalized_source(source).encode("utf-8")).hexdigest()[:16]
