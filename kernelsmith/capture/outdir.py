"""An output folder that `capture` or `apply` writes: new, empty, or one it wrote before (replaced).
A folder holding anything else is refused, so that nothing a user keeps there is lost."""

from __future__ import annotations

import keyword
import re
import shutil
from pathlib import Path

from kernelsmith.errors import UserError


def check(out: Path, manifest: str, owned: set[str], what: str, kept: str | None = None) -> None:
    """A UserError unless `prepare` may take `out`; nothing is made or removed (a command checks
    first, and prepares only once it has something to write: a failed run leaves no folder).
    `kept`: a name ending (`_seed.py`) of files another command writes beside this one's: left alone."""
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is not a directory")
    if not out.exists() or not any(out.iterdir()):
        return
    if not (out / manifest).is_file():
        raise UserError(f"--out {out} is not empty and holds no previous {what} ({manifest}): choose another DIR")
    others = [p.name for p in out.iterdir() if p.name not in owned | {manifest, "__pycache__"} and not _kept(p, kept)]
    if others:
        raise UserError(f"--out {out} holds files of its own besides a {what} ({', '.join(sorted(others)[:3])})")


def _kept(path: Path, kept: str | None) -> bool:
    return kept is not None and path.is_file() and path.name.endswith(kept)


def prepare(out: Path, manifest: str, owned: set[str], what: str, kept: str | None = None) -> None:
    """`manifest` marks a folder this command wrote; `owned` names what it wrote there besides it."""
    check(out, manifest, owned, what, kept)
    if not out.exists():
        out.mkdir(parents=True)
        return
    for p in out.iterdir():
        if not _kept(p, kept):
            shutil.rmtree(p) if p.is_dir() else p.unlink()


def importable(out: Path, flag: str = "--out") -> None:
    """A UserError unless `out`'s folder name can be imported as a package (`import my_patch`): a patch
    folder is one."""
    name = out.resolve().name
    if name.isidentifier() and not keyword.iskeyword(name):
        return
    fixed = re.sub(r"\W", "_", name)
    fixed = f"patch_{fixed}" if not fixed or fixed[0].isdigit() or keyword.iskeyword(fixed) else fixed
    raise UserError(
        f"{flag} {out}: {name!r} cannot be imported as a package (letters, digits and _, not starting with a digit, "
        f"not a Python keyword): try {flag} {out.parent / fixed}"
    )
