"""Containment: the sandbox's layers and the processes they hold, seen from the judge's side.

containment.py chooses the layers the host allows and states the five guarantees; isolation.py
(bubblewrap), landlock.py, seccomp.py and procmask.py are the layers; process.py spawns, watches and kills
process trees; sandbox_handle.py starts a sandbox (runner.sandbox_start, by module name) and watches it;
doctor.py is `kernelsmith doctor`: the guarantees, tried live from inside a sandbox.

May import evaluate's records only (result, checks, counters, nvml, options, protocol, runtime, verdict).
Never measuring (its independent sibling), build, profiling, judging, runner, pool, queued or backends.
The layers contract in pyproject.toml checks this.
"""
