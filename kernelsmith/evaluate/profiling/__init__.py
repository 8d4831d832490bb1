"""Nsight Compute: the counters stage (`eval --profile`), run on a candidate after its verdict.

ncu_stage.py runs ncu on one forward call in a contained process; ncu_target.py is that process
(`python -m kernelsmith.evaluate.profiling.ncu_target`). The counters' record and its reading
(CountersReport, the bottleneck class) are kernelsmith/evaluate/counters.py, a record beside result.py,
which holds it.

May import measuring, sandboxing and evaluate's records (it uses sandboxing and the records). Never build
(its independent sibling), judging, runner, pool, queued or backends. The layers contract in
pyproject.toml checks this.
"""
