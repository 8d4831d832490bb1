"""One self-contained HTML page: inline styles and scripts from the package's assets, and the
page's data as one JSON blob that the scripts read.

A report must open anywhere, offline and years later, so nothing is fetched: no CDN, no font,
no image. User text (code, errors, replies) reaches the page only inside the JSON blob and is
put into the document by the scripts as text nodes, never as markup.
"""

from __future__ import annotations

import contextlib
import html
import json
import math
import os
from pathlib import Path

from kernelsmith.errors import UserError

ASSETS = Path(__file__).resolve().parent / "assets"


def asset(name: str) -> str:
    """The text of a bundled asset; a missing one is the package's fault, so it raises."""
    text = (ASSETS / name).read_text(encoding="utf-8")
    if "</script" in text.lower() or "</style" in text.lower():  # would end the inline block early
        raise ValueError(f"asset {name} contains a closing tag and cannot be inlined")
    return text


def _finite(value: object) -> object:
    """NaN and infinities have no JSON spelling; the page shows them as missing."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def json_blob(data: object) -> str:
    """JSON that is safe inside <script type="application/json">: no `</` to close the tag and no
    `<!--` to open an HTML comment state; JSON.parse reads the escapes back as the same text."""
    text = json.dumps(_finite(data), ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text.replace("</", "<\\/").replace("<!--", "<\\u0021--")


def render_page(title: str, body: str, data: object, scripts: list[str], styles: list[str]) -> str:
    """The whole document. `body` is the page's own skeleton (trusted markup, no user text)."""
    css = "\n".join(asset(s) for s in styles)
    js = "\n".join(asset(s) for s in scripts)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        # Forbid every fetch, so a report can never call out even if some text slipped through.
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
        "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">\n"
        "<link rel=\"icon\" href=\"data:,\">\n"  # no favicon request
        f"<title>{html.escape(title)}</title>\n<style>\n{css}\n</style>\n</head>\n<body>\n{body}\n"
        f"<script type=\"application/json\" id=\"data\">{json_blob(data)}</script>\n"
        f"<script>\n{js}\n</script>\n</body>\n</html>\n"
    )


def write_atomic(path: Path, text: str) -> Path:
    """Write through a temporary file, so a reader never sees half a report. A path that cannot
    be written is a UserError, and leaves no temporary file behind."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        # FileExistsError comes from mkdir only: a file stands where a directory of the path should be
        why = f"{exc.filename} is not a directory" if isinstance(exc, FileExistsError) else exc.strerror or exc
        raise UserError(f"cannot write {path}: {why}") from None
    return path


def out_path(out: Path, default_name: str) -> Path:
    """`out`, or the default file name inside it when it is an existing directory."""
    out = Path(out)
    return out / default_name if out.is_dir() else out
