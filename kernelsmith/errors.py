"""Errors a user can cause. The CLI prints their message as one line and exits non-zero."""


class UserError(Exception):
    """Bad input from the user: a file, a flag, a config. Shown as one line, exit code 2."""

    exit_code = 2


class TaskError(UserError):
    """The task file is not a usable KernelBench-format task."""


class CandidateError(UserError):
    """The candidate file is not a KernelBench-format candidate (no ModelNew)."""


def one_line(text: str, limit: int) -> str:
    """`text` as one line (runs of whitespace, newlines included, made one space), cut at a word
    past `limit` characters and marked " ..." when longer: how a long error is quoted in one."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit].rsplit(" ", 1)[0] + " ..."


def raised_at(exc: BaseException) -> str:
    """Where in the user's code `exc` was raised, as " at path/file.py:12" ("" when no frame of it is the
    user's), so that a one-line error about a user's factory or model names its line (issue 55): the
    innermost frame outside kernelsmith, the standard library and installed packages (a frame in torch's
    Module.__call__ would name no line of the user's). A SyntaxError is where its text is."""
    import os
    import sysconfig
    import traceback

    if isinstance(exc, SyntaxError) and exc.filename:
        return f" at {_shown_path(exc.filename)}:{exc.lineno}"
    ours = os.path.dirname(os.path.abspath(__file__)) + os.sep
    paths = sysconfig.get_paths()
    libraries = tuple({os.path.abspath(paths[k]) + os.sep for k in ("stdlib", "platstdlib", "purelib", "platlib")})
    users = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if not f.filename.startswith("<")  # <frozen importlib._bootstrap>, <string> and the like
        and not os.path.abspath(f.filename).startswith((ours, *libraries))
    ]
    return f" at {_shown_path(users[-1].filename)}:{users[-1].lineno}" if users else ""


def _shown_path(path: str) -> str:
    """A path relative to the current folder where it is inside it, else as it is."""
    import os

    full = os.path.abspath(path)
    here = os.getcwd() + os.sep
    return full[len(here) :] if full.startswith(here) else path
