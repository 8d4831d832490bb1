"""What every `kernelsmith` command shares: the console it prints to, how it reports an error a user
can cause (one line, a non-zero exit), and the flags and option plumbing several commands take."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from kernelsmith.device import Device
from kernelsmith.errors import UserError

# ---- the console: stdout, full width when it is not a terminal

# Wider than any row a command prints: without a terminal, no cell is wrapped or cut.
UNBOUNDED_WIDTH = 100_000


def stdout_console() -> Console:
    """On a terminal, rich's own console: tables fit the window. Otherwise (a pipe, a file, a CI
    log) rich assumes 80 columns and cuts numbers and paths to fit them; there is no window to fit
    there, so the width is unbounded and every cell is printed whole. No emoji codes: a user's
    `zoo.py:cat` is not a cat (text of the user's is also escaped where it goes into markup: `shown`)."""
    console = Console(emoji=False)
    return console if console.is_terminal else Console(width=UNBOUNDED_WIDTH, emoji=False)


console = stdout_console()  # what commands print their tables and lines to


def shown(text: object) -> str:
    """Text of the user's (a path, an ENTRY, a name, a message) as rich prints it, not as markup."""
    return escape(str(text))


# ---- errors a user can cause: one line on stderr, a non-zero exit

err_console = Console(stderr=True, emoji=False)


def print_error(message: str) -> None:
    # Escaped: a message may hold brackets ("[evaluation] memory_limit") that are not markup.
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)


def print_note(message: str) -> None:
    """One line on stderr that is not an error (stdout keeps tables and --json's last line)."""
    err_console.print(f"[bold]note:[/] {escape(message)}", highlight=False, soft_wrap=True)


def note_full_size(task, path: Path, device: str) -> bool:
    """Say, in one line, that a task declaring CPU_SIZES runs at full size on the CPU; whether it does."""
    from kernelsmith.task_sizes import ADD_SMALL, FULL_SIZE_ON_CPU, full_size_on_cpu

    full = full_size_on_cpu(task, device)
    if full:
        print_note(f"{path} {FULL_SIZE_ON_CPU}: {ADD_SMALL}")
    return full


def fail(message: str, code: int = 2) -> NoReturn:
    """One `error:` line on stderr and exit `code`. Commands raise UserError for what a user caused; the app
    turns it into this where it registers them (app.py), so a command calls `fail` only for what is not one."""
    print_error(message)
    raise typer.Exit(code)


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


def options_or_fail(model, **values):
    """Build a pydantic options model; a bad value is one line and exit 2, not a traceback."""
    from pydantic import ValidationError

    try:
        return model(**values)
    except ValidationError as exc:
        first = exc.errors()[0]
        name = "--" + str(first["loc"][0]).replace("_", "-") if first.get("loc") else "option"
        raise UserError(f"bad value for {name}: {first['msg']}") from None


# ---- flags that several commands share


def eval_defaults():
    """EvalOptions' defaults, which eval's and bench's flags show and start from."""
    from kernelsmith.evaluate.options import EvalOptions

    return EvalOptions()


class EvalBackendKind(str, Enum):
    local = "local"
    ray = "ray"
    service = "service"


# Where evaluations run: the flags every evaluating command shares (evolve, evolve-suite, bench, train grpo).
EVAL_BACKEND = typer.Option(
    None,
    help="where evaluations run: local, ray (Ray actors, one per GPU) or service "
    "(a `kernelsmith serve` at --eval-url) \\[default: local]",
)
RAY_ADDRESS = typer.Option(None, help="Ray cluster to join (auto, ray://head:10001) \\[default: start one here]")
EVAL_URL = typer.Option(
    None, help="evaluate on the `kernelsmith serve` service at this URL (bearer token from $KERNELSMITH_TOKEN when set)"
)

# evolve and evolve-suite: a task without a seed starts from torch.compile's code on CUDA (kernelsmith seed)
INDUCTOR_SEED = typer.Option(
    True,
    "--inductor-seed/--no-inductor-seed",
    help="on CUDA, a task without a seed starts from torch.compile's own code (kernelsmith seed) when it is "
    "a success (and, for the LLM, faster than the reference)",
)


class Mutator(str, Enum):
    """An Enum, not a str, so that --help lists the choices (evolve.run.MUTATORS)."""

    llm = "llm"
    tune = "tune"


# evolve and evolve-suite: what they say when a search is interrupted (Ctrl-C)
INTERRUPTED_SEARCH = "interrupted; every evaluated program is stored: run the same command again to resume"


# The flags of evolve and evolve-suite that set a config field of the same name.
_SEARCH_FLAGS = ("iterations", "max_cost", "max_tokens", "time_limit", "early_stop", "workers")
# Their path flags: what each must be, and its name in a message.
_SEARCH_PATHS = {
    "task": ("file", "task file"),
    "seed": ("file", "seed file"),
    "run_dir": ("dir", "run directory"),
    "suite_dir": ("dir", "suite directory"),
    "seeds": ("dir", "seeds directory"),
    "runs_dir": ("dir", "runs directory"),
    "config": ("file", "config file"),
}


def evolve_settings(flags: dict):
    """The set-up evolve and evolve-suite share, from the command's flags by name (its `locals()` at the
    start, as optimize reads its own): its paths checked, the config file with the flags set over it (a flag
    left out leaves the file's value), and an endpoint without a model refused before the first call."""
    from kernelsmith.evolve.run import evolve_config

    for name, (kind, what) in _SEARCH_PATHS.items():
        if name in flags:
            check_paths(kind, what, flags[name])
    config, mutator, url, model = flags["config"], flags["mutator"].value, flags["llm_base_url"], flags["model"]
    _check_model(url, model, config, mutator)
    backend = (flags["eval_backend"], flags["ray_address"], flags["eval_url"])
    simple = {name: flags[name] for name in _SEARCH_FLAGS if name in flags}
    return evolve_config(config, _overrides(url, model, flags["device"], backend, **simple), mutator)


def _overrides(llm_base_url: str | None, model: str | None, device: Device | None, backend: tuple, **simple) -> dict:
    """The config fields the flags set."""
    from kernelsmith.evaluate.backends import backend_overrides

    overrides: dict = {k: v for k, v in simple.items() if v is not None}
    kind, ray_address, eval_url = backend
    backend_set = backend_overrides(kind.value if kind is not None else None, ray_address, eval_url)
    if backend_set:
        overrides["backend"] = backend_set
    if llm_base_url is not None:
        overrides.setdefault("llm", {})["base_url"] = llm_base_url
    if model is not None:
        overrides.setdefault("llm", {})["models"] = [{"name": model}]
    if device is not None:
        overrides["evaluation"] = {"device": device.value}
    return overrides


def _check_model(llm_base_url: str | None, model: str | None, config: Path | None, mutator: str) -> None:
    """An endpoint without a model would send every request for the placeholder model "default":
    refuse before the first call, unless the config file names the models."""
    from kernelsmith.evolve.config import read_config_file

    if llm_base_url is None or model is not None or mutator != "llm":
        return
    llm = read_config_file(config).get("llm") if config else None
    if not (isinstance(llm, dict) and llm.get("models")):
        raise UserError(
            "--llm-base-url needs --model (the model's name at that endpoint), "
            "or a config file whose [llm] lists models"
        )
