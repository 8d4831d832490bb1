"""How every `kernelsmith` command reports an error a user can cause: one line, a non-zero exit."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import typer
from rich.console import Console

from kernelsmith.errors import UserError

err_console = Console(stderr=True)


def print_error(message: str) -> None:
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)


def fail(message: str, code: int = 2) -> None:
    print_error(message)
    raise typer.Exit(code)


@contextmanager
def user_errors() -> Iterator[None]:
    """A UserError raised inside becomes `fail(...)` with its exit code."""
    try:
        yield
    except UserError as exc:
        fail(str(exc), exc.exit_code)
