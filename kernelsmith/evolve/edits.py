"""How an LLM reply becomes a program: fenced code, EVOLVE-BLOCK merges, SEARCH/REPLACE diffs.

Every failure is an `EditError` whose message goes back to the LLM in its next prompt, so each
message says which block failed and what in the program came closest.
"""

from __future__ import annotations

import difflib
import re
import textwrap

_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([^\s`]*)[^`]*$")  # fence, language tag, rest
_PYTHON_TAGS = {"python", "py", "python3"}
_MODEL_NEW = re.compile(r"^[ \t]*class[ \t]+ModelNew\b", re.MULTILINE)
_EVOLVE_START = re.compile(r"#\s*EVOLVE-BLOCK-START")
_EVOLVE_END = re.compile(r"#\s*EVOLVE-BLOCK-END")
_DIFF_SEARCH = re.compile(r"^\s*<{5,9}\s*SEARCH\s*$")
_DIFF_DIVIDER = re.compile(r"^\s*={5,9}\s*$")
_DIFF_REPLACE = re.compile(r"^\s*>{5,9}\s*REPLACE\s*$")
_SHOWN = 120  # characters of a program line quoted back to the LLM

Shift = tuple[str, str]  # (indent to add, indent to remove) when re-indenting a REPLACE text
_NO_SHIFT: Shift = ("", "")


class EditError(Exception):
    """A reply that cannot be turned into a program; the message is feedback for the LLM."""


def _normalize(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _strip_think(reply: str) -> str:
    """Drop a reasoning section: its drafts are not the answer (an unclosed one has no answer)."""
    reply = _normalize(reply)
    if "</think>" in reply:
        return reply.rsplit("</think>", 1)[1]
    if "<think>" in reply:
        return reply.split("<think>", 1)[0]
    return reply


def _trim_blank_edges(lines: list[str]) -> list[str]:
    while lines and not lines[0].strip():
        lines = lines[1:]
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return lines


def _fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language tag, body) of each fenced block; an unterminated last fence runs to the end."""
    blocks: list[tuple[str, str]] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        fence = opening.group(1)
        close = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        j = i + 1
        while j < len(lines) and not close.match(lines[j]):
            j += 1
        body = _trim_blank_edges(lines[i + 1 : j])
        if body:
            blocks.append((opening.group(2).lower(), textwrap.dedent("\n".join(body)) + "\n"))
        i = j + 1
    return blocks


def extract_code(reply: str) -> str | None:
    """The program in a reply: the last python block defining ModelNew, else the largest
    python block, else (same order) an untagged one; None when the reply has no fenced code."""
    blocks = _fenced_blocks(_strip_think(reply))
    for tier in (
        [b for tag, b in blocks if tag in _PYTHON_TAGS],
        [b for tag, b in blocks if tag == ""],
    ):
        with_model = [b for b in tier if _MODEL_NEW.search(b)]
        if with_model:
            return with_model[-1]
        if tier:
            return max(tier, key=len)
    return None


# -- EVOLVE-BLOCK markers ----------------------------------------------------------------------


def evolve_blocks(code: str) -> list[tuple[int, int]]:
    """0-based line numbers of each (EVOLVE-BLOCK-START, EVOLVE-BLOCK-END) marker pair;
    the evolvable text lies strictly between them. Unbalanced markers are an EditError."""
    spans: list[tuple[int, int]] = []
    start: int | None = None
    for n, line in enumerate(_normalize(code).split("\n")):
        if _EVOLVE_START.search(line):
            if start is not None:
                raise EditError(
                    f"EVOLVE-BLOCK-START on line {n + 1} opens inside the block "
                    f"begun on line {start + 1}; blocks cannot nest"
                )
            start = n
        elif _EVOLVE_END.search(line):
            if start is None:
                raise EditError(f"EVOLVE-BLOCK-END on line {n + 1} has no EVOLVE-BLOCK-START before it")
            spans.append((start, n))
            start = None
    if start is not None:
        raise EditError(f"EVOLVE-BLOCK-START on line {start + 1} is never closed by EVOLVE-BLOCK-END")
    return spans


def merge_evolve_blocks(parent: str, child: str) -> str:
    """Put the child's evolvable text into the parent's blocks, so that the code outside the
    markers (the fixed harness) cannot be changed by a rewrite."""
    parent, child = _normalize(parent), _normalize(child)
    parent_spans = evolve_blocks(parent)
    if not parent_spans:
        return child
    child_lines = child.splitlines()
    child_spans = evolve_blocks(child)
    if child_spans:
        if len(child_spans) != len(parent_spans):
            raise EditError(
                f"the program has {len(parent_spans)} EVOLVE-BLOCK sections but the reply "
                f"has {len(child_spans)}; keep every EVOLVE-BLOCK-START/END marker pair"
            )
        contents = [child_lines[s + 1 : e] for s, e in child_spans]
    elif len(parent_spans) == 1:
        contents = [child_lines]
    else:
        raise EditError(
            f"the program has {len(parent_spans)} EVOLVE-BLOCK sections but the reply has "
            "no markers; keep every EVOLVE-BLOCK-START/END marker pair"
        )
    parent_lines = parent.splitlines()
    merged: list[str] = []
    previous = 0
    for (start, end), content in zip(parent_spans, contents):
        merged += parent_lines[previous : start + 1] + content
        previous = end
    merged += parent_lines[previous:]
    return "\n".join(merged) + ("\n" if parent.endswith("\n") else "")


# -- SEARCH/REPLACE diffs ----------------------------------------------------------------------


def parse_diff_blocks(reply: str) -> list[tuple[str, str]]:
    """(search, replace) texts, each line ending in a newline, of the reply's SEARCH/REPLACE
    blocks in order. Text outside the blocks (prose, code fences) is ignored."""
    blocks: list[tuple[str, str]] = []
    state, search, replace = "outside", [], []
    for line in _strip_think(reply).split("\n"):
        if state == "outside":
            if _DIFF_SEARCH.match(line):
                state, search, replace = "search", [], []
        elif _DIFF_SEARCH.match(line):
            raise EditError(
                f"SEARCH/REPLACE block {len(blocks) + 1} is not closed before the next "
                "<<<<<<< SEARCH; end each block with ======= and >>>>>>> REPLACE"
            )
        elif state == "search":
            if _DIFF_DIVIDER.match(line):
                state = "replace"
            else:
                search.append(line)
        elif _DIFF_REPLACE.match(line):
            blocks.append(("".join(s + "\n" for s in search), "".join(r + "\n" for r in replace)))
            state = "outside"
        else:
            replace.append(line)
    if state != "outside":
        missing = "=======" if state == "search" else ">>>>>>> REPLACE"
        raise EditError(
            f"SEARCH/REPLACE block {len(blocks) + 1} is incomplete (no {missing} line); the reply may have been cut off"
        )
    return blocks


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _line_shift(code_line: str, search_line: str) -> Shift | None:
    """How the search line must be re-indented to equal the code line, if it can be."""
    if code_line.strip() != search_line.strip():
        return None
    code_indent, search_indent = _indent(code_line), _indent(search_line)
    if code_indent.endswith(search_indent):
        return (code_indent[: len(code_indent) - len(search_indent)], "")
    if search_indent.endswith(code_indent):
        return ("", search_indent[: len(search_indent) - len(code_indent)])
    return None


def _window_shift(code: list[str], search: list[str]) -> Shift | None:
    """The one indentation shift that maps every search line onto its code line, if any."""
    shift: Shift | None = None
    for code_line, search_line in zip(code, search):
        if not code_line.strip() and not search_line.strip():
            continue
        line_shift = _line_shift(code_line, search_line)
        if line_shift is None or (shift is not None and line_shift != shift):
            return None
        shift = line_shift
    return shift or _NO_SHIFT


def _find(lines: list[str], search: list[str]) -> list[tuple[int, int, Shift]]:
    """Matches (start, end, shift) of the first tolerance level that has any: exact, then
    trailing whitespace, then a uniform indentation offset, then blank lines ignored."""
    n = len(search)
    starts = range(len(lines) - n + 1)
    found = [(i, i + n, _NO_SHIFT) for i in starts if lines[i : i + n] == search]
    if found:
        return found
    code_rs, search_rs = [s.rstrip() for s in lines], [s.rstrip() for s in search]
    found = [(i, i + n, _NO_SHIFT) for i in starts if code_rs[i : i + n] == search_rs]
    if found:
        return found
    for i in starts:
        shift = _window_shift(lines[i : i + n], search)
        if shift is not None:
            found.append((i, i + n, shift))
    if found:
        return found
    kept = [i for i, s in enumerate(lines) if s.strip()]
    dense = [s for s in search if s.strip()]
    for k in range(len(kept) - len(dense) + 1):
        window = kept[k : k + len(dense)]
        shift = _window_shift([lines[i] for i in window], dense)
        if shift is not None:
            found.append((window[0], window[-1] + 1, shift))
    return found


def _reindent(line: str, shift: Shift) -> str:
    add, remove = shift
    if not line.strip():
        return line
    if remove:
        line = line[len(remove) :] if line.startswith(remove) else line.lstrip(" \t")
    return add + line


def _quote(line: str) -> str:
    line = line.strip()
    return line if len(line) <= _SHOWN else line[:_SHOWN] + "..."


def _no_match_error(number: int, search: list[str], lines: list[str]) -> EditError:
    """Name the block, show its start, and point at the nearest program line."""
    head = "\n".join(f"    {_quote(s)}" for s in [s for s in search if s.strip()][:3])
    stripped = [s.strip() for s in lines]
    missing = next((s.strip() for s in search if s.strip() and s.strip() not in stripped), None)
    if missing is None:
        hint = "each of its lines is in the program, but not together in this order"
    else:
        close = difflib.get_close_matches(missing, [s for s in stripped if s], n=1, cutoff=0.5)
        where = (
            f"the most similar program line is line {stripped.index(close[0]) + 1}: `{_quote(close[0])}`"
            if close
            else "no program line resembles it"
        )
        hint = f"its line `{_quote(missing)}` is not in the program; {where}"
    return EditError(
        f"SEARCH/REPLACE block {number} matches nothing in the program; its SEARCH "
        f"starts:\n{head}\n{hint}. Copy the SEARCH lines exactly from the current program."
    )


def apply_diff(code: str, reply: str) -> str:
    """Apply the reply's SEARCH/REPLACE blocks in order, each to the result of the one before."""
    blocks = parse_diff_blocks(reply)
    if not blocks:
        raise EditError("the reply holds no SEARCH/REPLACE block")
    code = _normalize(code)
    lines = code.splitlines()
    for number, (search_text, replace_text) in enumerate(blocks, start=1):
        search = search_text.splitlines()
        if not any(s.strip() for s in search):
            raise EditError(f"SEARCH/REPLACE block {number} has an empty SEARCH section; quote the lines to change")
        found = _find(lines, search)
        if not found:
            raise _no_match_error(number, search, lines)
        if len(found) > 1:
            places = ", ".join(str(start + 1) for start, _, _ in found[:5])
            raise EditError(
                f"SEARCH/REPLACE block {number} matches {len(found)} places (lines "
                f"{places}); include more context so that it matches one"
            )
        start, end, shift = found[0]
        lines[start:end] = [_reindent(r, shift) for r in replace_text.splitlines()]
    return "\n".join(lines) + ("\n" if code.endswith("\n") and lines else "")


# -- a reply, in either mode -------------------------------------------------------------------


def _rewrite(parent_code: str | None, reply: str) -> str:
    code = extract_code(reply)
    if code is None:
        raise EditError("the reply holds no python code block")
    if any(_DIFF_SEARCH.match(line) for line in code.splitlines()):
        raise EditError("the reply's code block holds SEARCH/REPLACE markers, but a complete program was asked for")
    return merge_evolve_blocks(parent_code, code) if parent_code else code


def apply_reply(parent_code: str | None, reply: str, mode: str) -> str:
    """The child program a reply makes. "rewrite": the reply's program (merged into the
    parent's EVOLVE-BLOCKs). "diff": the reply's SEARCH/REPLACE blocks applied to the parent,
    or, when it has none but carries a full program defining ModelNew, that as a rewrite."""
    if mode == "rewrite":
        return _rewrite(parent_code, reply)
    if mode != "diff":
        raise ValueError(f"unknown edit mode {mode!r}; expected 'rewrite' or 'diff'")
    if parent_code is None:
        raise ValueError("diff mode needs a parent program")
    if parse_diff_blocks(reply):
        return apply_diff(parent_code, reply)
    code = extract_code(reply)
    if code is not None and _MODEL_NEW.search(code):
        return _rewrite(parent_code, reply)
    raise EditError("the reply holds no SEARCH/REPLACE block and no full program defining ModelNew")
