"""What a verdict's words mean, and the one rule that says "this program is a success".

A *flag* is something the candidate did that is not allowed. A *task note* is something true of
the task, whoever solves it; it never makes an honest candidate fail. Search, archive, prompts,
report, bench, the GRPO reward and the SFT/RL export all decide success with `is_success`.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum


class Flag(str, Enum):
    """Findings against the candidate; any one of them means "not a success"."""

    no_custom_kernel = "no_custom_kernel"  # none of its own kernels ran during forward
    torch_compute_op = "torch_compute_op"  # library kernels did the reference's work (see docs/integrity.md)
    background_thread = "background_thread"  # threads still running after forward returned
    unsynced_work = "unsynced_work"  # work still running on another stream after forward returned
    faster_than_roofline = "faster_than_roofline"  # a time below the task's physical floor
    timing_mismatch = "timing_mismatch"  # the sandbox's clock disagrees with the judge's
    activity_tampered = "activity_tampered"  # the device-activity record was switched off mid-call

    def __str__(self) -> str:
        return self.value


class TaskNote(str, Enum):
    """Facts about the task, shown once beside the verdict; never held against the candidate."""

    degenerate_tolerance = "degenerate_tolerance"  # zeros or a constant pass the elementwise check
    output_aliases_input = "output_aliases_input"  # the reference returns (a view of) an input
    too_small_to_time = "too_small_to_time"  # the reference runs shorter than timing resolves well

    def __str__(self) -> str:
        return self.value


# Names that older versions put among the flags but are task facts: read back as task notes.
LEGACY_TASK_NOTES = {"degenerate_task": TaskNote.degenerate_tolerance.value}

CORRECT = "correct"


def candidate_flags(flags: Iterable[str]) -> list[str]:
    """The flags that count against the candidate (legacy task-note names dropped)."""
    return [str(getattr(f, "value", f)) for f in flags if str(getattr(f, "value", f)) not in LEGACY_TASK_NOTES]


def is_success(status, flags: Iterable[str]) -> bool:
    """Correct, and the candidate did nothing that is not allowed. Task notes do not count."""
    return str(getattr(status, "value", status)) == CORRECT and not candidate_flags(flags)


def split_legacy(flags: Iterable[str]) -> tuple[list[str], dict[str, str]]:
    """Stored flags of an older version -> (flags, task notes moved out of them)."""
    kept, notes = [], {}
    for f in flags:
        name = str(getattr(f, "value", f))
        if name in LEGACY_TASK_NOTES:
            notes[LEGACY_TASK_NOTES[name]] = "recorded as a flag by an earlier version"
        else:
            kept.append(name)
    return kept, notes
