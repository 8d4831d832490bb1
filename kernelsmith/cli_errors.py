"""How every `kernelsmith` command reports an error a user can cause: one line, a non-zero exit."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from kernelsmith.errors import UserError

err_console = Console(stderr=True)


def print_error(message: str) -> None:
    # Escaped: a message may hold brackets ("[evaluation] memory_limit") that are not markup.
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)


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


def size_flag(text: str, flag: str, minimum: int = 1) -> int:
    """A size flag's value in bytes, at least `minimum`; a bad one is a UserError that names the flag."""
    from kernelsmith.evaluate.options import parse_size

    try:
        n = parse_size(text)
    except UserError as exc:
        raise UserError(f"{flag}: {exc}") from None
    if n < minimum:
        raise UserError(f"{flag}: {text!r} is below the least allowed, {minimum} bytes")
    return n


def check_paths(want: str, what: str, *paths: Path | None) -> None:
    """Each path that exists must be a "file" or a "dir" (`want`); one of the other kind is named
    as such. A missing path is left to the command, whose message says what it looked for."""
    for p in paths:
        if p is None:
            continue
        if want == "file" and Path(p).is_dir():
            raise UserError(f"{what} {p} is a directory, not a file")
        if want == "dir" and Path(p).exists() and not Path(p).is_dir():
            raise UserError(f"{what} {p} is not a directory")
