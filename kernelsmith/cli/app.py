"""The `kernelsmith` command (also `python -m kernelsmith`): the typer app, its commands in the order
`--help` lists them, and `main`. Each command lives in the module of its group; common.py holds what
they share. A command raises UserError for what a user caused; here, where the commands are registered,
each is wrapped once so that such an error is one line and its exit code (the one error path)."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any

import typer

from kernelsmith.cli.cache import cache_app
from kernelsmith.cli.capture import apply_cmd, capture_cmd
from kernelsmith.cli.common import fail, print_error
from kernelsmith.cli.data import data_app
from kernelsmith.cli.doctor import doctor_cmd
from kernelsmith.cli.eval import eval_cmd
from kernelsmith.cli.evolve import evolve_cmd
from kernelsmith.cli.fib import export_fib_cmd, import_fib_cmd
from kernelsmith.cli.optimize import optimize_cmd
from kernelsmith.cli.runs import export_cmd, report_cmd, runs_cmd
from kernelsmith.cli.seed import seed_cmd
from kernelsmith.cli.serve import serve_cmd
from kernelsmith.cli.suite import bench_cmd, evolve_suite_cmd
from kernelsmith.cli.train import train_app
from kernelsmith.device import KINETO_QUIET
from kernelsmith.errors import UserError

# -h as well as --help; every subcommand inherits it from this context.
app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    help="Evolve fast, verified GPU kernels for PyTorch operators.",
)


def _print_version(value: bool) -> None:
    if value:
        from kernelsmith import __version__

        print(f"kernelsmith {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False,
        "--version",
        callback=_print_version,
        is_eager=True,
        metavar="",  # a flag: typer would show "<bool>", as if it took a value
        help="print the version and exit",
    ),
) -> None:
    """Evolve fast, verified GPU kernels for PyTorch operators."""


app.command("eval")(eval_cmd)
app.command("evolve")(evolve_cmd)
app.command("bench")(bench_cmd)
app.command("evolve-suite")(evolve_suite_cmd)
app.command("runs")(runs_cmd)
app.command("report")(report_cmd)
app.command("export")(export_cmd)
app.command("capture")(capture_cmd)
app.command("doctor")(doctor_cmd)
app.command("serve")(serve_cmd)
app.command("apply")(apply_cmd)
app.command("seed")(seed_cmd)
app.command("import-fib")(import_fib_cmd)
app.command("export-fib")(export_fib_cmd)
app.command("optimize")(optimize_cmd)
app.add_typer(data_app, name="data", help="Training data from search runs: SFT steps and RL prompts.")
app.add_typer(train_app, name="train", help="Train on that data: TRL SFT with LoRA, GRPO with the speedup reward.")
app.add_typer(
    cache_app,
    name="cache",
    help="The baseline cache: list the reference's stored times and the cards' ceilings, clear them.",
)


def _reported(command: Callable[..., Any]) -> Callable[..., Any]:
    """`command`, with a UserError it raises said as one `error:` line and its exit code (`fail`)."""

    @functools.wraps(command)  # typer reads the parameters through __wrapped__
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except UserError as exc:
            fail(str(exc), exc.exit_code)

    return run


def _report_user_errors(group: typer.Typer) -> None:
    """Wrap every command of `group` and of its subgroups in `_reported`, once."""
    for info in group.registered_commands:
        if info.callback is not None:
            info.callback = _reported(info.callback)
    for sub in group.registered_groups:
        if sub.typer_instance is not None:
            _report_user_errors(sub.typer_instance)


_report_user_errors(app)


def main() -> None:
    """Run the app; a usage error (bad flag, bad choice, missing argument) is one `error:` line and
    exit 2, like every other error the user can cause, not click's or rich's box."""
    for name, value in KINETO_QUIET.items():
        os.environ.setdefault(name, value)
    try:  # typer vendors click from 0.2x on: its exceptions are not the `click` package's
        from typer._click import exceptions as click
    except ImportError:
        from click import exceptions as click

    try:
        code = app(standalone_mode=False, prog_name="kernelsmith")
    except click.NoArgsIsHelpError as exc:  # `kernelsmith`, `kernelsmith data`: the help
        if exc.format_message():  # the help text; typer's rich help has printed itself already
            print(exc.format_message())
        sys.exit(2)
    except click.UsageError as exc:
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
        print_error(exc.format_message() + hint)
        sys.exit(2)
    except click.ClickException as exc:
        print_error(exc.format_message())
        sys.exit(exc.exit_code)
    except typer.Abort:  # end of input at a prompt
        print_error("aborted")
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)
