"""Regions across the library boundary (issue 57): a library op (a GEMM, attention) with the split regions
beside it, proposed beside the split regions (regions.py), which stay as they are. It imports the tape and the
split regions; capture/run.py imports it."""

from kernelsmith.capture.fused.propose import all_regions, fused_regions

__all__ = ["all_regions", "fused_regions"]
