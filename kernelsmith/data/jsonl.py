"""Writing a dataset: one JSON object per line, whole or not at all."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from kernelsmith.errors import UserError


def write_jsonl(rows: list[dict], out: Path) -> None:
    """One JSON object per line (UTF-8), written to OUT.tmp and renamed: a reader never sees half a file."""
    tmp = out.with_name(out.name + ".tmp")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with tmp.open("w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        os.replace(tmp, out)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise UserError(f"cannot write {out}: {exc.strerror or exc}") from None
