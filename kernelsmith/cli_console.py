"""The console that `kernelsmith` commands print their tables and lines to (stdout)."""

from __future__ import annotations

from rich.console import Console

# Wider than any row a command prints: without a terminal, no cell is wrapped or cut.
UNBOUNDED_WIDTH = 100_000


def stdout_console() -> Console:
    """On a terminal, rich's own console: tables fit the window. Otherwise (a pipe, a file, a CI
    log) rich assumes 80 columns and cuts numbers and paths to fit them; there is no window to fit
    there, so the width is unbounded and every cell is printed whole."""
    console = Console()
    return console if console.is_terminal else Console(width=UNBOUNDED_WIDTH)
