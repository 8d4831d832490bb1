"""The `kernelsmith` command, the only CLI layer: app.py holds the typer app and `main`, one module per
command group holds its commands (thin: option plumbing and printing over the packages they call), and
common.py what they share (console, errors, shared flags)."""

from kernelsmith.cli.app import main

__all__ = ["main"]
