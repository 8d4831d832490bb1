"""Nsight Compute's counters (kernelsmith/evaluate/counters.py): parsed from output recorded on the
H200 (ncu 2025.3.1, `--csv --metrics ...`, two launches of torch.rand's kernel), and the
bottleneck class they point to."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelsmith.evaluate.counters import KernelCounters, counters_text, parse_ncu_csv

RECORDED = (Path(__file__).parents[1] / "cases/profiles/ncu_h200_2026-12-03.csv").read_text()


def test_recorded_output_parses_into_one_entry_per_launch():
    kernels = parse_ncu_csv(RECORDED)
    assert len(kernels) == 2
    k = kernels[0]
    assert "distribution_elementwise_grid_stride_kernel" in k.name
    assert k.duration_ns == 820768.0 and k.dram_write_bytes == 1583557888.0  # "1,583,557,888" bytes
    assert k.registers == 52.0 and k.grid == 1056.0 and k.block == 256.0
    assert k.dram_gbps == pytest.approx((59136 + 1583557888) / 820768)
    assert k.sm_pct == pytest.approx(68.64) and k.dram_pct == pytest.approx(40.1)
    assert k.bottleneck().startswith("compute-bound: SM at 69% of peak")


def test_units_are_scaled_to_nanoseconds_and_bytes():
    header = '"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"\n'
    rows = [
        '"0","k","gpu__time_duration.sum","usecond","1.5"',
        '"0","k","dram__bytes_read.sum","Mbyte","2"',
        '"0","k","dram__bytes_write.sum","byte","0"',
        '"0","k","sm__throughput.avg.pct_of_peak_sustained_elapsed","%","n/a"',
    ]
    k = parse_ncu_csv("==PROF== Connected\n" + header + "\n".join(rows))[0]
    assert k.duration_ns == 1500.0 and k.dram_read_bytes == 2e6 and k.sm_pct is None


@pytest.mark.parametrize(
    "counters, verdict",
    [
        (dict(duration_ns=3e6, dram_pct=92, sm_pct=30), "memory-bound"),
        (dict(duration_ns=3e6, dram_pct=20, sm_pct=35, tensor_pct=85), "compute-bound"),
        (dict(duration_ns=3e6, dram_pct=25, sm_pct=30, occupancy_pct=12), "latency/occupancy-bound"),
        (dict(duration_ns=2000, dram_pct=5, sm_pct=3), "launch-bound"),
    ],
)
def test_bottleneck_classes(counters, verdict):
    assert KernelCounters(name="k", **counters).bottleneck().startswith(verdict)


def test_counters_text_reports_bandwidth_against_the_measured_peak_and_spills():
    k = KernelCounters(
        name="k", duration_ns=1e6, dram_read_bytes=2e9, dram_write_bytes=2e9, registers=128, local_loads=4, sm_pct=10
    )
    text = counters_text(k, peak_gbps=4300)
    assert text.startswith("DRAM 4000 GB/s (93% of measured peak)") and "128 registers/thread with spills" in text
