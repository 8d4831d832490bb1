"""Sizes that keep the package readable: no module over 400 lines, no function over 80, and no more
than a few modules directly in each of kernelsmith/evaluate/, capture/, apply/ and patch/ (CROWDED). One
line per offence, exit 1 when there is one.

A function's lines run from its `def` line to its last line (decorators not counted, nested
functions counted in it and on their own); a module's lines are the file's lines; a package's modules
are the .py files directly in its folder, __init__.py not counted. Run by `make lint`.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

MODULE_LINES = 400
FUNCTION_LINES = 80
# package folder -> the most modules directly in it (__init__.py not counted)
CROWDED = {
    Path("kernelsmith/evaluate"): 15,
    # recording a model (checking a patch is apply/, its runtime patch/); 13: floors.py, speed of light (issue 57)
    Path("kernelsmith/capture"): 13,
    Path("kernelsmith/apply"): 10,
    Path("kernelsmith/patch"): 13,  # 13: shapes.py, a kernel at each shape its task holds (issue 55)
}


def _skipped(path: Path, skip: list[Path]) -> bool:
    return any(path == s or path.is_relative_to(s) for s in skip)


def module_offences(path: Path, shown: Path, module_lines: int, function_lines: int) -> list[str]:
    source = path.read_text(encoding="utf-8")
    found = []
    lines = len(source.splitlines())
    if lines > module_lines:
        found.append(f"{shown}: module of {lines} lines (most: {module_lines})")
    for node in ast.walk(ast.parse(source, filename=str(path))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > function_lines:
                found.append(f"{shown}:{node.lineno}: function {node.name} of {length} lines (most: {function_lines})")
    return found


def package_offences(root: Path, skip: list[Path], crowded: dict[Path, int]) -> list[str]:
    found = []
    for folder, most in crowded.items():
        if _skipped(folder, skip) or not (root / folder).is_dir():
            continue
        modules = [p for p in (root / folder).glob("*.py") if p.name != "__init__.py"]
        if len(modules) > most:
            found.append(f"{folder}/: {len(modules)} modules directly in it (most: {most}); group them in subpackages")
    return found


def offences(
    root: Path,
    paths: list[Path],
    skip: list[Path],
    module_lines: int = MODULE_LINES,
    function_lines: int = FUNCTION_LINES,
    crowded: dict[Path, int] | None = None,
) -> list[str]:
    """Every offence under `paths` (relative to `root`), leaving out what lies under `skip`."""
    found = []
    for top in paths:
        for path in sorted((root / top).rglob("*.py")):
            shown = path.relative_to(root)
            if not _skipped(shown, skip):
                found += module_offences(path, shown, module_lines, function_lines)
    return found + package_offences(root, skip, CROWDED if crowded is None else crowded)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Paths are relative to --root.",
    )
    parser.add_argument("paths", nargs="*", type=Path, default=[Path("kernelsmith")], help="default: kernelsmith")
    parser.add_argument(
        "--skip",
        action="append",
        type=Path,
        default=[],
        metavar="PATH",
        help="leave out a file or folder (and its module count), e.g. --skip kernelsmith/evaluate; may be given more "
        "than once",
    )
    parser.add_argument(
        "--root", type=Path, default=Path(__file__).resolve().parent.parent, help="default: this tool's repository"
    )
    parser.add_argument("--module-lines", type=int, default=MODULE_LINES, help=f"default: {MODULE_LINES}")
    parser.add_argument("--function-lines", type=int, default=FUNCTION_LINES, help=f"default: {FUNCTION_LINES}")
    args = parser.parse_args(argv)
    skip = [s.resolve().relative_to(args.root.resolve()) if s.is_absolute() else s for s in args.skip]
    found = offences(args.root, args.paths, skip, args.module_lines, args.function_lines)
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
