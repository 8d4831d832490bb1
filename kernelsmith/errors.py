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
