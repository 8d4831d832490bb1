"""tools/check_sizes.py: the sizes `make lint` holds the package to, on a temporary tree."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _tool():
    spec = importlib.util.spec_from_file_location("check_sizes", REPO / "tools" / "check_sizes.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _function(name: str, lines: int) -> str:
    """A function of exactly `lines` lines."""
    return f"def {name}():\n" + "    x = 1\n" * (lines - 2) + "    return x\n"


def _tree(root: Path) -> None:
    pkg = root / "kernelsmith"
    (pkg / "evaluate").mkdir(parents=True)
    (pkg / "short.py").write_text(_function("fits", 80))  # at the limits: 80 lines
    (pkg / "long_function.py").write_text("import os\n\n\n" + _function("too_long", 81))
    (pkg / "at_limit.py").write_text("\n".join(f"X{i} = {i}" for i in range(400)) + "\n")
    (pkg / "long_module.py").write_text("\n".join(f"X{i} = {i}" for i in range(401)) + "\n")
    for i in range(16):
        (pkg / "evaluate" / f"m{i}.py").write_text("")
    (pkg / "evaluate" / "__init__.py").write_text("")
    (pkg / "evaluate" / "big.py").write_text(_function("inside", 90))


def test_finds_an_overlong_function_and_module_and_a_crowded_package(tmp_path, capsys):
    tool = _tool()
    _tree(tmp_path)
    assert tool.main(["--root", str(tmp_path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "kernelsmith/evaluate/big.py:1: function inside of 90 lines (most: 80)",
        "kernelsmith/long_function.py:4: function too_long of 81 lines (most: 80)",
        "kernelsmith/long_module.py: module of 401 lines (most: 400)",
        "kernelsmith/evaluate/: 17 modules directly in it (most: 15); group them in subpackages",
    ]


def test_skip_leaves_a_folder_out_and_a_clean_tree_passes(tmp_path, capsys):
    tool = _tool()
    _tree(tmp_path)
    assert tool.main(["--root", str(tmp_path), "--skip", "kernelsmith/evaluate"]) == 1
    assert "evaluate" not in capsys.readouterr().out
    skip = [
        "--skip",
        "kernelsmith/evaluate",
        "--skip",
        "kernelsmith/long_function.py",
        "--skip",
        "kernelsmith/long_module.py",
    ]
    assert tool.main(["--root", str(tmp_path), *skip]) == 0
    assert capsys.readouterr().out == ""
