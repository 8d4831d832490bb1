"""The evaluation service: compile, check and time a candidate against its PyTorch reference.

Rooms by concern, each importing only those below it (the layers contract in pyproject.toml; "|": rooms
that never import each other):

    backends/                 where evaluations run: local pool, Ray actors, a remote service
    pool.py, queued.py        warm judges, one per GPU; the queue EvalPool and RayPool share
    judging/ | runner/        the judge process (the verdict) | the sandbox process (the candidate's code)
    build/ | profiling/       CUDA C++ builds as their own stage | Nsight Compute's counters stage
    measuring/ | sandboxing/  times and what ran | containment and its layers, process trees
    result.py                 the verdict record
    checks.py, counters.py, nvml.py, options.py, protocol.py, runtime.py, verdict.py   records and rules
"""

from kernelsmith.evaluate.options import EvalOptions
from kernelsmith.evaluate.pool import EvalBackend, EvalPool, evaluate
from kernelsmith.evaluate.result import EvalResult, Status, TimingStats

__all__ = ["EvalBackend", "EvalOptions", "EvalPool", "EvalResult", "Status", "TimingStats", "evaluate"]
