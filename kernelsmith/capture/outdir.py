"""An output folder that `capture` or `apply` writes: new, empty, or one it wrote before (replaced).
A folder holding anything else is refused, so that nothing a user keeps there is lost."""

from __future__ import annotations

import shutil
from pathlib import Path

from kernelsmith.errors import UserError


def check(out: Path, manifest: str, owned: set[str], what: str) -> None:
    """A UserError unless `prepare` may take `out`; nothing is made or removed (a command checks
    first, and prepares only once it has something to write: a failed run leaves no folder)."""
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is not a directory")
    if not out.exists() or not any(out.iterdir()):
        return
    if not (out / manifest).is_file():
        raise UserError(f"--out {out} is not empty and holds no previous {what} ({manifest}): choose another DIR")
    others = [p.name for p in out.iterdir() if p.name not in owned | {manifest, "__pycache__"}]
    if others:
        raise UserError(f"--out {out} holds files of its own besides a {what} ({', '.join(sorted(others)[:3])})")


def prepare(out: Path, manifest: str, owned: set[str], what: str) -> None:
    """`manifest` marks a folder this command wrote; `owned` names what it wrote there besides it."""
    check(out, manifest, owned, what)
    if not out.exists():
        out.mkdir(parents=True)
        return
    for p in out.iterdir():
        shutil.rmtree(p) if p.is_dir() else p.unlink()
