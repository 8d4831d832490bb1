"""Where candidates run: the one device type of every command, setting and verdict (a module of its
own, with no imports, so that the CLI can offer the choice without importing torch)."""

from __future__ import annotations

from enum import Enum


class Device(str, Enum):
    cuda = "cuda"
    cpu = "cpu"


DEVICES = tuple(d.value for d in Device)

# On the CPU, a candidate's Triton runs in the interpreter and is timed against CPU torch: the
# ratio ranks candidates of one task against each other but says nothing of a GPU speedup.
CPU_SPEEDUP_NOTE = "a CPU figure (Triton runs interpreted there): relative only, not a GPU speedup"

# What every command says to --device cuda on a machine without a visible GPU (one line, exit 2).
NO_CUDA_GPU = "--device cuda: no CUDA GPU is visible here; use --device cpu"

# Kineto (torch's profiler backend, which the evaluator and capture open) prints a "USDT: ...
# profiler_start / profiler_stop" line to stderr for every window from level 4 up; 6 keeps stderr
# for what the user needs to read. Set where a process starts (the CLI, the judge and sandbox
# processes), never over a value the user set.
KINETO_QUIET = {"KINETO_LOG_LEVEL": "6"}
