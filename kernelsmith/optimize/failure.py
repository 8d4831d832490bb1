"""A region's step that raised though the user did nothing wrong: a bug of ours, an evaluation worker that
failed. One region's failure must not cost the others their search and the patch (on an H100 a GPT-2's
one bad evaluation ended the whole `optimize` with a traceback, issue 54): the region gets one line, in
its state and on the page, and the run goes on. The traceback is kept in a file the line names, so that
the bug can still be reported as the project's own errors are: with their traceback.
"""

from __future__ import annotations

import traceback
from pathlib import Path

from kernelsmith.errors import one_line

LINE_LIMIT = 400  # characters of the exception's own words in the line


def failure_line(what: str, exc: BaseException, kept: Path | None) -> str:
    """'{what} failed: RuntimeError: <first line> ... <last line>' (the pool's message of a failed worker
    holds the worker's traceback: its last line is the error), with where the traceback was kept."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    said = lines[0] if lines else ""
    if len(lines) > 1:
        said += f" ... {lines[-1]}"
    line = one_line(f"{what} failed: {type(exc).__name__}: {said}", LINE_LIMIT)
    if kept is not None and _keep(kept, exc):
        line += f" (not your doing: its traceback is in {kept}, for a bug report)"
    return line


def _keep(path: Path, exc: BaseException) -> bool:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(traceback.format_exception(exc)), encoding="utf-8")
    except OSError:  # the line still says what failed
        return False
    return True
