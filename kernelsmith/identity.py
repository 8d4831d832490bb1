"""The project's one program identity: "is this the same program" is decided by the syntax tree,
not the text, for tasks, candidates, stored programs, search dedup, SFT dedup, decontamination,
the reward's parent cache and the tuner's skeletons alike.

Two sources are equal when their ASTs are: comments, blank lines, indentation width, line breaks
inside brackets, quote style, redundant parentheses and docstrings do not count. Source that does
not parse falls back to its text with comments and blank lines dropped, so a broken program
still has a stable identity.
"""

from __future__ import annotations

import ast
import hashlib
import re

_WITH_DOCSTRING = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def _drop_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if not isinstance(node, _WITH_DOCSTRING) or not node.body:
            continue
        first = node.body[0]
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            node.body = node.body[1:] or [ast.Pass()]
    return tree


def normalized_code(code: str) -> str:
    """The text fallback: comments, blank lines and trailing spaces dropped."""
    lines = []
    for line in code.splitlines():
        line = re.sub(r"\s+#.*$", "", line).rstrip() if "#" in line else line.rstrip()
        if line.strip() and not line.lstrip().startswith("#"):
            lines.append(line)
    return "\n".join(lines)


def normalized_source(source: str) -> str:
    """`ast.dump` of the source without docstrings (no line numbers); the text fallback on a syntax error."""
    source = source.lstrip("\ufeff")
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):  # ValueError: a NUL byte in the source
        return "text:" + normalized_code(source)
    return ast.dump(_drop_docstrings(tree))


def program_hash(source: str) -> str:
    """16 hex digits of the normalised source's SHA-256: the program's identity."""
    return hashlib.sha256(normalized_source(source).encode("utf-8")).hexdigest()[:16]
