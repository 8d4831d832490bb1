"""A failed build, told as an LLM needs it: the compiler's first error lines, not ninja's log."""

from __future__ import annotations

import re

MAX_LINES = 24
MAX_CHARS = 3000
# nvcc "cuda.cu(12): error: ...", gcc/clang "main.cpp:5:3: error: ...", ptxas / the linker.
_ERROR = re.compile(
    r"(\berror\b|undefined reference|ptxas fatal|ld returned|fatal error|No such file|"
    r"catastrophic|multiple definition)",
    re.IGNORECASE,
)
_NOISE = re.compile(
    r"^(\[\d+/\d+\]|FAILED:|ninja: build stopped|subprocess\.CalledProcessError|Error building extension)"
)
MAX_FOLLOW = 300  # a longer line after an error is a compiler command line, not source and caret


class BuildError(RuntimeError):
    """An extension's build failed; the message is the compiler's first error lines."""


def first_error_lines(text: str, scrub: dict[str, str] | None = None) -> str:
    """The first error lines of a compiler log (each with the two lines after it: nvcc and gcc
    print the source line and a caret there), scratch paths removed; the log's tail if no line
    looks like an error."""
    for old, new in (scrub or {}).items():
        if old:
            text = text.replace(old, new)
    lines = [ln.rstrip() for ln in text.splitlines()]
    keep: list[str] = []
    i = 0
    while i < len(lines) and len(keep) < MAX_LINES:
        line = lines[i]
        if _ERROR.search(line) and not _NOISE.match(line) and "-Werror" not in line and len(line) < 2000:
            keep.append(line)
            for follow in lines[i + 1 : i + 3]:
                if (
                    follow.strip()
                    and len(follow) < MAX_FOLLOW
                    and not _ERROR.search(follow)
                    and not _NOISE.match(follow)
                ):
                    keep.append(follow)
            i += 1
            continue
        i += 1
    if not keep:
        keep = [ln for ln in lines if ln.strip() and not _NOISE.match(ln)][-MAX_LINES:]
    out = "\n".join(keep[:MAX_LINES])
    return out if len(out) <= MAX_CHARS else out[:MAX_CHARS] + "\n..."
