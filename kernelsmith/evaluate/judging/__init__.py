"""The judge: the trusted process that gives a candidate its verdict.

worker.py is its entry (`python -m kernelsmith.evaluate.judging.worker`, started by the pool); service.py
answers the pool's requests; judge.py holds the warm state (spare sandboxes, task modules, baselines, the
counters stage); evaluation.py runs one evaluation step by step, its correctness stages in
evaluation_correctness.py and its timing stages in evaluation_timing.py.

May import build, profiling, measuring, sandboxing and evaluate's records (result, checks, counters, nvml,
options, protocol, runtime, verdict). Never runner: the judge starts a sandbox by module name (through
sandboxing.sandbox_handle) and talks to it by message; nor pool, queued or backends, which start judges.
The layers contract in pyproject.toml checks this.
"""
