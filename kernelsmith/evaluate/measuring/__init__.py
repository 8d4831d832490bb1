"""Times, and what ran on the device: the one timing harness and what reads or keeps its figures.

timing.py is the harness (device time per call in a CUDA graph, eager call time), persisting_l2.py resets
the L2's persisting lines before its timed calls, graph_trace.py reads a graph replay's kernel trace,
graph_batch.py is the batch the judge's clock times and judge_clock.py that clock's rule; activity.py
records what ran (and holds the operator rule), breakdown.py where a forward's device time goes,
roofline.py the physical floor (speed of light) and each card's ceilings; baselines.py times the reference
and torch.compile, baseline_cache.py keeps their figures, noise.py says how far two figures move by chance.
Both the judge and the sandbox use it.

May import evaluate's records only (result, checks, counters, nvml, options, protocol, runtime, verdict).
Never sandboxing (its independent sibling), build, profiling, judging, runner, pool, queued or backends.
The layers contract in pyproject.toml checks this.
"""
