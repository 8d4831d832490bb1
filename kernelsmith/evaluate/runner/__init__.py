"""The sandbox process: where candidate code runs, and what runs beside it there.

sandbox_start.py is its entry (`python -m kernelsmith.evaluate.runner.sandbox_start`, started by
sandboxing.sandbox_handle): it applies the containment layers that must come before torch is imported,
then sandbox.py loads the task and the candidate and runs what the judge asks (trials, timing, the
judge-clocked batch, builds); trial.py is a correctness trial (forward twice on the same inputs) and
poison.py what it fills with NaN before each call; watch.py checks what forward did at the Python level
(kernel launches, threads left running); escape_probe.py holds `kernelsmith doctor`'s escape attempts, run here with no
candidate.

May import build, profiling, measuring, sandboxing and evaluate's records (it uses all but profiling).
Never judging: the sandbox decides nothing and answers the judge by message; nor pool, queued or backends.
The layers contract in pyproject.toml checks this.
"""
