"""JSONL made by `kernelsmith data sft|rl` -> a `datasets.Dataset` in the shape TRL expects.

SFT rows keep only `messages` (TRL's conversational language-modeling format). RL rows keep
`prompt` and lift every `meta` field to a top-level column: GRPOTrainer passes each extra column
to the reward functions as a keyword list, one value per completion.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kernelsmith.errors import UserError

# Keywords GRPOTrainer itself passes to reward functions: a meta field of that name would clash.
_RESERVED = {
    "prompt",
    "prompts",
    "completion",
    "completions",
    "completion_ids",
    "trainer_state",
    "log_extra",
    "log_metric",
    "environments",
}
# What SpeedupReward reads from each RL row (parent_code and parent_speedup may be null).
RL_META_FIELDS = ("task_source", "operator", "parent_code", "parent_speedup")


def read_rows(path: str | Path) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line of a JSONL file."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"{p}: no such data file")
    rows = []
    try:
        lines = p.read_text(encoding="utf-8").split("\n")  # not splitlines: U+2028 may sit inside a string
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{p}: cannot read it as UTF-8 text: {exc}") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserError(f"{p} line {number} is not JSON: {exc.msg}") from None
        if not isinstance(row, dict):
            raise UserError(f"{p} line {number} is not a JSON object")
        rows.append((number, row))
    if not rows:
        raise UserError(f"{p} holds no rows")
    return rows


def _messages(value: Any) -> list[dict[str, str]] | None:
    """A list of {role, content} strings, or None when `value` is not one."""
    if not isinstance(value, list) or not value:
        return None
    out = []
    for m in value:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            return None
        out.append({"role": m["role"], "content": m["content"]})
    return out


def _dataset(records: list[dict[str, Any]], path: Path):
    from datasets import Dataset

    try:
        return Dataset.from_list(records)
    except (TypeError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError: mixed types in a column
        raise UserError(f"{path}: rows do not share one schema: {str(exc).splitlines()[0]}") from None


def sft_dataset(path: str | Path):
    """Dataset with one column, `messages` (system, user, assistant)."""
    records = []
    for number, row in read_rows(path):
        messages = _messages(row.get("messages"))
        if messages is None or messages[-1]["role"] != "assistant":
            raise UserError(
                f"{path} line {number}: no `messages` list ending in an assistant turn "
                "(is this a file made by `kernelsmith data sft`?)"
            )
        records.append({"messages": messages})
    return _dataset(records, Path(path))


def rl_dataset(path: str | Path):
    """Dataset with `prompt` (system, user) and one column per `meta` field."""
    records = []
    for number, row in read_rows(path):
        prompt, meta = _messages(row.get("prompt")), row.get("meta")
        if prompt is None or not isinstance(meta, dict):
            raise UserError(
                f"{path} line {number}: no `prompt` messages and `meta` object "
                "(is this a file made by `kernelsmith data rl`?)"
            )
        missing = [k for k in RL_META_FIELDS if k not in meta]
        clash = sorted(_RESERVED & set(meta))
        if missing or not isinstance(meta.get("task_source"), str):
            raise UserError(f"{path} line {number}: meta lacks {', '.join(missing) or 'a task_source text'}")
        if clash:
            raise UserError(f"{path} line {number}: meta field {clash[0]!r} clashes with a name TRL passes itself")
        records.append({"prompt": prompt, **meta})
    return _dataset(records, Path(path))
