"""What `kernelsmith optimize` found, as optimize.json, the table and the page show it: per region its
search, its kernel's verdict and its part in the patch; the patch's check; the model's time before and
after in each mode, with the prediction from the verdicts beside the measurement."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from kernelsmith.evolve.pace import Pace


class Record(BaseModel):
    """A record optimize.json keeps: an infinite figure (a prediction's bound) is written "Infinity" and read
    back as one (JSON has no spelling for it)."""

    model_config = ConfigDict(ser_json_inf_nan="strings")


class Span(Record):
    """A median with the spread of its samples that one outlier cannot stretch (capture/profile.py's Spread)."""

    median: float
    low: float
    high: float


class ModeTime(Record):
    """The forward's time in one mode and measure, original and patched (apply's check)."""

    mode: str  # eager, compile, graphs
    measure: str  # device time, eager time, CPU time, ...
    before_ms: Span
    after_ms: Span
    speedup: float
    within_noise: bool
    # The fractions of the forward's floor (capture's speed of light) its times reach, before and after (None: no card)
    of_floor_before: float | None = None
    of_floor_after: float | None = None


class Kernel(Record):
    """One region's kernel in the patch (absent where the region gave none)."""

    in_patch: bool
    why: str | None = None  # why it is not in the patch, or not substituted
    taken: dict[str, float] = Field(default_factory=dict)  # mode -> its regions taken per forward
    served_by: str | None = None  # the kernel that takes its regions (same ops, or a larger region holding them)
    after_ms: Span | None = None  # its regions' time per patched eager forward, in the profiled measure
    served: str | None = None  # how it serves the model (eager mode)
    modes: list[str] = Field(default_factory=list)  # the modes it serves (patch.json's), as the check left them
    left_out: dict[str, str] = Field(default_factory=dict)  # mode -> why it does not serve it


class ModeOutcome(Record):
    """A mode as the patch serves it (apply/serving.py): with these kernels, or the model as it was."""

    mode: str  # eager, compile, graphs
    checked: bool  # the check ran it (--mode)
    kernels: list[str] = Field(default_factory=list)  # the kernels that take their regions there (none: as it was)
    as_was: str | None = None  # why it runs the model as it was (None: kernels serve it)
    measure: str | None = None  # the last check's profiled measure
    speedup: float | None = None  # the last check's
    said: str = ""  # the mode in one line


class PatchOutcome(Record):
    key: str  # the kernels (run, program) and modes it was made of: the same key is not made again
    path: str | None  # the patch folder (None: none was written)
    passed: bool
    reason: str  # one line: why it passed or failed, or why there is no patch
    kernels: dict[str, Kernel] = Field(default_factory=dict)
    times: list[ModeTime] = Field(default_factory=list)
    modes: list[ModeOutcome] = Field(default_factory=list)  # every mode as the patch serves it
    prediction: dict | None = None  # capture/gains.py's Prediction (eager, the profiled measure)
    capture_times: list[dict] = Field(default_factory=list)  # capture's original forward against apply's


class RegionOutcome(Record):
    name: str
    rank: int
    share: float  # of the captured forward
    share_range: list[float] = Field(default_factory=list)
    calls: int = 1
    task: str | None = None  # capture/NAME.py
    searched: bool = False
    start: str | None = None  # where its starting kernel came from
    allotment_s: float | None = None  # its share of the budget
    elapsed_s: float | None = None  # its search's time, every run of it
    iterations: int = 0  # stored after the start
    stop_reason: str | None = None
    speedup: float | None = None  # its best kernel's verdict speedup over its task's reference
    start_speedup: float | None = None  # its start's
    program: int | None = None  # the best program's id in its run
    verdict: str | None = None  # the best program's status (or the start's, where nothing succeeded)
    kernel: Kernel | None = None  # its part in the patch
    note: str | None = None  # what could not be done, in one line
    run_report: str | None = None  # runs/NAME/report.html, relative to OUT
    floor_ms: float | None = None  # its calls' floor per forward on the card (capture's speed of light; None: no card)
    of_floor: float | None = None  # the fraction of it capture's time reached (floor over time)
    of_floor_after: float | None = None  # ... its kernel's time in the patched eager forward reached, where measured


class SpeedOfLight(Record):
    """The forward's speed of light as capture found it (capture.json's `speed_of_light`, capture/floors.py): its
    least bytes and FLOPs, its floor on the card, the fraction of it capture's forward reached, and the card's
    measured ceilings with its datasheet's beside (None: no card, the CPU; or no datasheet)."""

    bytes: int
    flops: int
    floor_ms: float | None = None
    of_floor: float | None = None
    card: str | None = None
    bandwidth: float | None = None
    peak_flops: float | None = None
    datasheet: str | None = None
    datasheet_bandwidth: float | None = None
    datasheet_flops: float | None = None
    no_floor: str | None = None  # why there is no floor: no card (the CPU), or its ceilings could not be measured
    said: str = ""  # in one line, as the terminal says it


class TimeRow(Record):
    """A row of "where the forward's time went" (breakdown.py): in ms of the check's eager forward, or in
    shares of capture's forward where no eager forward was measured in its measure."""

    label: str  # a region's name, or a group of them, the rest of the forward, the whole forward
    before: float
    after: float | None  # None: not measured
    how: str  # how `after` was found: measured, predicted, unchanged, in another region's kernel


class Optimized(Record):
    entry: str
    device: str
    out: str
    measure: str  # what capture's shares are of (device time on CUDA, CPU time on the CPU)
    profiled_ms: Span | None = None  # capture's profiled forward
    wall_ms: Span | None = None  # capture's forward without the profiler
    speed_of_light: SpeedOfLight | None = None  # the forward's (None: a capture made before it was kept)
    budget_s: float
    slots: int = 1  # searches at once
    search_s: float = 0.0  # this run's searching, wall time
    search_total_s: float = 0.0  # the regions' search time over every run of them, summed (their elapsed_s)
    # the regions' evaluations over every run: judged, a minute of search_total_s, time per phase (evolve/pace.py)
    evaluations: Pace | None = None
    capture_s: float | None = None
    regions: list[RegionOutcome] = Field(default_factory=list)
    time_rows: list[TimeRow] = Field(default_factory=list)  # where the forward's time went (they add up)
    time_unit: str = "ms"  # of time_rows: "ms" (the check's eager forward) or "share" (capture's, no check)
    patch: PatchOutcome | None = None
    too_small: str | None = None  # the budget ended every search at its start, in one line
    start_advice: str | None = None  # the regions without a start, and what to do, in one line (said once)
    startless: list[str] = Field(default_factory=list)  # those regions
    passed: bool = False  # a patch was written and passed its check
    reason: str = ""  # one line: the outcome
    report: str | None = None  # report.html
