"""What one Inductor compilation of a task leaves: its output code and the launch configs it chose.

A record is kept as a directory: `output_code.py` (Inductor's output, verbatim) and `record.json`
(everything else). Recorded Inductor output is what the transformation is tested on
(tests/cases/seed/), and `kernelsmith seed --record DIR` keeps one of each seed it makes.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kernelsmith.errors import UserError

CODE_FILE = "output_code.py"
RECORD_FILE = "record.json"


@dataclass(frozen=True)
class LaunchConfig:
    """The config a Triton kernel of Inductor's runs with: its block sizes (the heuristics' kwargs),
    warps and stages, and how it was chosen (autotuned on a GPU, the only config, or not chosen)."""

    kwargs: dict[str, int]
    num_warps: int
    num_stages: int
    chosen_by: str


@dataclass(frozen=True)
class InductorRecord:
    """Inductor's output code for a task's Model, and how to call it.

    `call(args)` in the output code takes the Model's parameters and buffers (`state`, by their
    names in `named_parameters()` then `named_buffers()`) followed by the tensors of get_inputs() at
    positions `tensor_inputs` (other inputs were constants when Inductor compiled), and returns
    a tuple: the Model's one output when `single_output`, else its outputs in order. `training` is
    the mode the Model was compiled in where its graph depends on the mode (BatchNorm, Dropout: the
    code is for that mode only, buffer updates included), else None.
    """

    output_code: str
    launches: dict[str, LaunchConfig]
    state: tuple[str, ...]
    tensor_inputs: tuple[int, ...]
    single_output: bool
    provenance: dict[str, str] = field(default_factory=dict)  # torch, triton, device, how it was made
    training: bool | None = None

    def save(self, directory: Path) -> None:
        meta = asdict(self)
        del meta["output_code"]
        try:
            directory.mkdir(parents=True, exist_ok=True)
            (directory / CODE_FILE).write_text(self.output_code, encoding="utf-8")
            (directory / RECORD_FILE).write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
        except OSError as exc:
            raise UserError(f"cannot keep the Inductor record in {directory}: {exc.strerror or exc}") from None

    @classmethod
    def load(cls, directory: Path) -> InductorRecord:
        try:
            code = (directory / CODE_FILE).read_text(encoding="utf-8")
            meta = json.loads((directory / RECORD_FILE).read_text(encoding="utf-8"))
            return cls(
                output_code=code,
                launches={k: LaunchConfig(**v) for k, v in meta["launches"].items()},
                state=tuple(meta["state"]),
                tensor_inputs=tuple(meta["tensor_inputs"]),
                single_output=bool(meta["single_output"]),
                provenance=dict(meta.get("provenance", {})),
                training=meta.get("training"),
            )
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(f"{directory} is not an Inductor record: {exc}") from None
        except (ValueError, KeyError, TypeError) as exc:
            raise UserError(f"{directory / RECORD_FILE} is not an Inductor record: {exc!r}") from None
