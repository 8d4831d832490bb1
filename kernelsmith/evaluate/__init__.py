"""The evaluation service: compile, check and time a candidate against its PyTorch reference."""

from kernelsmith.evaluate.options import EvalOptions
from kernelsmith.evaluate.pool import EvalBackend, EvalPool, evaluate
from kernelsmith.evaluate.result import EvalResult, Status, TimingStats

__all__ = ["EvalBackend", "EvalOptions", "EvalPool", "EvalResult", "Status", "TimingStats", "evaluate"]
