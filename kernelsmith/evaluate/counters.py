"""Hardware counters of a kernel from Nsight Compute, and the one-line bottleneck they point to.

A small fixed set of metrics that explain speed (achieved DRAM bandwidth and its share of peak,
SM and tensor-pipe throughput, achieved occupancy, L2 hit rate, registers per thread, local
memory traffic (spills), shared memory per block), read from `ncu --csv --metrics ...` output.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

METRICS = {
    "gpu__time_duration.sum": "duration_ns",
    "dram__bytes_read.sum": "dram_read_bytes",
    "dram__bytes_write.sum": "dram_write_bytes",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_pct",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_pct",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active": "tensor_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "occupancy_pct",
    "lts__t_sector_hit_rate.pct": "l2_hit_pct",
    "launch__registers_per_thread": "registers",
    "launch__shared_mem_per_block_static": "smem_static_bytes",
    "launch__shared_mem_per_block_dynamic": "smem_dynamic_bytes",
    "smsp__sass_inst_executed_op_local_ld.sum": "local_loads",
    "smsp__sass_inst_executed_op_local_st.sum": "local_stores",
    "launch__grid_size": "grid",
    "launch__block_size": "block",
}
# Units ncu may print a metric in, scaled to the field's unit (ns, bytes).
_SCALE = {
    "ns": 1.0,
    "us": 1e3,
    "usecond": 1e3,
    "ms": 1e6,
    "msecond": 1e6,
    "s": 1e9,
    "second": 1e9,
    "nsecond": 1.0,
    "byte": 1.0,
    "kbyte": 1e3,
    "mbyte": 1e6,
    "gbyte": 1e9,
    "tbyte": 1e12,
    "kib": 1024.0,
    "mib": 2.0**20,
    "gib": 2.0**30,
}
DEFAULT_TIMEOUT = 120.0  # seconds the counters stage may take (ncu_stage.py)
BOUND_PCT = 60.0  # a unit this busy (% of its peak) is what limits the kernel
LAUNCH_BOUND_NS = 5_000  # a kernel this short is mostly launch latency


class KernelCounters(BaseModel):
    name: str
    launches: int = 1  # launches of this kernel in the profiled forward call (metrics: the longest one's)
    total_ns: float | None = None  # summed duration over those launches
    duration_ns: float | None = None
    dram_read_bytes: float | None = None
    dram_write_bytes: float | None = None
    dram_pct: float | None = None
    sm_pct: float | None = None
    tensor_pct: float | None = None
    occupancy_pct: float | None = None
    l2_hit_pct: float | None = None
    registers: float | None = None
    smem_static_bytes: float | None = None
    smem_dynamic_bytes: float | None = None
    local_loads: float | None = None
    local_stores: float | None = None
    grid: float | None = None
    block: float | None = None

    @property
    def dram_gbps(self) -> float | None:
        """Achieved DRAM bandwidth (GB/s): bytes read and written over the kernel's duration."""
        if not self.duration_ns or self.dram_read_bytes is None or self.dram_write_bytes is None:
            return None
        return (self.dram_read_bytes + self.dram_write_bytes) / self.duration_ns

    @property
    def spills(self) -> bool:
        return bool((self.local_loads or 0) + (self.local_stores or 0))

    def bottleneck(self) -> str:
        """memory-bound, compute-bound, latency/occupancy-bound or launch-bound, with the numbers."""
        dram, sm = self.dram_pct or 0.0, max(self.sm_pct or 0.0, self.tensor_pct or 0.0)
        if self.duration_ns is not None and self.duration_ns < LAUNCH_BOUND_NS:
            return f"launch-bound: {self.duration_ns / 1e3:.2g} us per launch, too short to fill the GPU"
        if dram >= BOUND_PCT and dram >= sm:
            return f"memory-bound: DRAM at {dram:.0f}% of peak (SM {sm:.0f}%)"
        if sm >= BOUND_PCT:
            return f"compute-bound: SM at {sm:.0f}% of peak (DRAM {dram:.0f}%)"
        occ = self.occupancy_pct
        why = f"achieved occupancy {occ:.0f}%" if occ is not None else "neither unit busy"
        return f"latency/occupancy-bound: DRAM {dram:.0f}%, SM {sm:.0f}% of peak, {why}"


ProfileStatus = Literal["ok", "missing", "not_permitted", "failed", "timeout", "unsupported"]


class CountersReport(BaseModel):
    """The counters stage of one candidate (Nsight Compute, on request): informational, no verdict
    reads it. Where it could not run, `status` and `message` say why."""

    status: ProfileStatus
    message: str | None = None
    kernels: list[KernelCounters] = Field(default_factory=list)  # heaviest first (summed duration)
    launches: int = 0  # kernel launches profiled (one forward call, capped)
    seconds: float = 0.0  # wall time of the stage
    tool: str | None = None  # the ncu that ran
    contained: dict[str, str] = Field(default_factory=dict)  # the profiled process's layers and outcomes

    @property
    def heaviest(self) -> KernelCounters | None:
        return self.kernels[0] if self.kernels else None

    def summary(self) -> str:
        """One line: the heaviest kernel's bottleneck, or why there are no counters."""
        if self.status != "ok":
            return f"no counters ({self.status}): {self.message or ''}".rstrip(": ")
        k = self.heaviest
        return f"{k.name[:60]}: {k.bottleneck()}" if k else "no kernel ran in the profiled call"


def merge_launches(launches: list[KernelCounters], keep: int) -> list[KernelCounters]:
    """One entry per kernel name, heaviest (summed duration) first, at most `keep`; each keeps the
    metrics of its longest launch."""
    by_name: dict[str, list[KernelCounters]] = {}
    for k in launches:
        by_name.setdefault(k.name, []).append(k)
    merged = []
    for ks in by_name.values():
        longest = max(ks, key=lambda k: k.duration_ns or 0.0)
        total = sum(k.duration_ns or 0.0 for k in ks)
        merged.append(longest.model_copy(update={"launches": len(ks), "total_ns": total}))
    merged.sort(key=lambda k: -(k.total_ns or 0.0))
    return merged[:keep]


def _number(text: str) -> float | None:
    text = text.strip().replace(",", "")
    if not text or text.lower() in ("n/a", "nan"):
        return None
    try:
        return float(text)
    except ValueError:
        return None


def parse_ncu_csv(text: str) -> list[KernelCounters]:
    """Kernels of `ncu --csv --metrics ...` output, in launch order (each launch its own entry)."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]  # ncu's own "==PROF==" lines are not CSV
    rows = csv.DictReader(io.StringIO("\n".join(lines)))
    by_id: dict[str, dict] = {}
    for row in rows:
        metric, value = row.get("Metric Name"), row.get("Metric Value")
        if row.get("ID") is None or metric not in METRICS or value is None:
            continue
        entry = by_id.setdefault(row["ID"], {"name": row.get("Kernel Name") or "?"})
        number = _number(value)
        if number is not None:
            unit = (row.get("Metric Unit") or "").strip().lower()
            number *= _SCALE.get(unit, 1.0) if unit not in ("%", "") else 1.0
        entry[METRICS[metric]] = number
    return [KernelCounters(**v) for _, v in sorted(by_id.items(), key=lambda kv: int(kv[0]))]


def ncu_path() -> str | None:
    """Nsight Compute's command line, where one is installed ($KERNELSMITH_NCU, PATH, the CUDA toolkit)."""
    explicit = os.environ.get("KERNELSMITH_NCU")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    found = shutil.which("ncu")
    if found:
        return found
    for root in ("/usr/local/cuda", "/opt/nvidia"):
        for p in sorted(Path(root).glob("**/ncu")) if Path(root).is_dir() else []:
            if p.is_file() and os.access(p, os.X_OK):
                return str(p)
    return None


def counters_text(k: KernelCounters, peak_gbps: float | None = None) -> str:
    """One line of counters for a prompt or a table."""
    parts = []
    if k.dram_gbps is not None:
        parts.append(
            f"DRAM {k.dram_gbps:.0f} GB/s"
            + (f" ({100 * k.dram_gbps / peak_gbps:.0f}% of measured peak)" if peak_gbps else "")
        )
    for label, value in (
        ("SM", k.sm_pct),
        ("tensor pipe", k.tensor_pct),
        ("occupancy", k.occupancy_pct),
        ("L2 hit", k.l2_hit_pct),
    ):
        if value is not None:
            parts.append(f"{label} {value:.0f}%")
    if k.registers is not None:
        parts.append(f"{k.registers:.0f} registers/thread" + (" with spills" if k.spills else ""))
    smem = (k.smem_static_bytes or 0) + (k.smem_dynamic_bytes or 0)
    if smem:
        parts.append(f"{smem / 1024:.0f} KiB shared/block")
    return ", ".join(parts)
