"""The work directory of `kernelsmith optimize`: one folder holds every step, and what each step left.

    OUT/optimize.json    the settings, each step's state and the result (written after every step)
    OUT/capture/         the capture: task files and capture.json (made whole, then moved in place)
    OUT/seeds/NAME.py    each region's starting kernel as its search got it (NAME.txt: where it came
                         from, or why it has none)
    OUT/runs/NAME/       each region's search: run.sqlite, best.py, summary.json, report.html
    OUT/PATCH/           the patch (`kernelsmith apply`'s package; PATCH is ENTRY's factory + "_patch")
    OUT/failures/NAME.txt  the traceback of a region's start or search that failed by no doing of the
                         user's (the region's line names it; the other regions went on)
    OUT/report.html      the page

Resume: a step whose state says it is done is not done again (the capture, a finished search, the patch
of the same kernels in the same modes); a search that was killed goes on from its store. The settings
that make the capture (ENTRY, --device, --top, --min-share, --forwards, --small, --shape) must be those it was
made with; the budget, the modes, the seeds and the LLM may change between runs.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from pydantic import Field, ValidationError

from kernelsmith.errors import UserError
from kernelsmith.optimize.result import Optimized, PatchOutcome, Record

STATE = "optimize.json"
CAPTURE, SEEDS, RUNS, REPORT, FAILURES = "capture", "seeds", "runs", "report.html", "failures"
# The settings a work directory is bound to: they make the capture and choose its regions.
BOUND = ("entry", "device", "top", "min_share", "forwards", "small", "shapes")


class RegionState(Record):
    """What the work directory knows of one region's search between runs."""

    seed_origin: str | None = None  # where its starting kernel came from, in words
    finished: bool = False  # its last search ended by itself (not killed), for the reason below
    stop_reason: str | None = None  # summary.json's stop_reason of that search
    failed: str | None = None  # why its search could not run, in one line
    failed_start: str | None = None  # the identity of the start it failed from (another start is tried)
    crashed: bool = False  # it failed by no doing of the user's (optimize/failure.py): tried again on resume
    allotment_s: float = 0.0  # its share of the budget in the last run, seconds


class State(Record):
    version: int = 1
    settings: dict = Field(default_factory=dict)  # BOUND's values the capture was made with
    captured: bool = False
    capture_s: float | None = None  # how long the capture took
    regions: dict[str, RegionState] = Field(default_factory=dict)
    slots: int = 1  # searches at once in the last run that searched
    patch: PatchOutcome | None = None  # the last patch (one of the same kernels and modes is not made again)
    result: Optimized | None = None  # the last run's outcome


class WorkDir:
    def __init__(self, out: Path):
        self.out = Path(out)
        self.state_path = self.out / STATE
        self.capture = self.out / CAPTURE
        self.seeds = self.out / SEEDS
        self.runs = self.out / RUNS
        self.report = self.out / REPORT

    def run_dir(self, name: str) -> Path:
        return self.runs / name

    def failure(self, name: str) -> Path:
        """Where the traceback of the region's failed start or search is kept (optimize/failure.py)."""
        return self.out / FAILURES / f"{name}.txt"

    def patch_dir(self, entry: str) -> Path:
        """OUT/<factory>_patch: a name Python can import (the patch is a package)."""
        factory = re.sub(r"\W", "_", entry.rpartition(":")[2]) or "model"
        name = f"{factory}_patch"
        return self.out / (name if name.isidentifier() and not name[0].isdigit() else "model_patch")

    def open(self, settings: dict) -> State:
        """The state of this work directory: new (an empty or missing folder), or the stored one when its
        capture was made with the same `settings`; anything else is a UserError in one line."""
        if self.out.exists() and not self.out.is_dir():
            raise UserError(f"--out {self.out} is not a directory")
        if not self.state_path.is_file():
            if self.out.is_dir() and any(self.out.iterdir()):
                raise UserError(
                    f"--out {self.out} is not empty and holds no previous optimize ({STATE}): choose another DIR"
                )
            return State(settings=settings)
        try:
            state = State.model_validate(json.loads(self.state_path.read_text(encoding="utf-8")))
        except (ValueError, ValidationError):
            raise UserError(f"--out {self.out}: {STATE} is not an optimize's; choose another DIR") from None
        if not state.captured:  # nothing made yet: the settings may change (a --min-share that was too high)
            state.settings = settings
            return state
        changed = [k for k in BOUND if state.settings.get(k) != settings.get(k)]
        if changed:
            said = ", ".join(f"{_flag(k)} {state.settings.get(k)!r} (now {settings.get(k)!r})" for k in changed)
            raise UserError(
                f"--out {self.out} holds an optimize made with {said}: run it with the same settings to resume, "
                "or choose another --out"
            )
        return state

    def save(self, state: State) -> None:
        """optimize.json, written whole (a kill never leaves half of it)."""
        self.out.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_name(STATE + ".tmp")
        tmp.write_text(state.model_dump_json(indent=1) + "\n", encoding="utf-8")
        os.replace(tmp, self.state_path)


def _flag(key: str) -> str:
    return {"entry": "ENTRY", "shapes": "--shape"}.get(key) or "--" + key.replace("_", "-")
