"""CUDA C++ (and C++) extension builds as their own stage: specs read from a candidate's source
(spec.py), a contained builder (builder.py), a pool of them on the CPU cores (pool.py), the
content-addressed cache they publish to (cache.py), and the sandbox's load_inline that uses it
(hook.py).

May import measuring, sandboxing and evaluate's records (it uses sandboxing and the records). Never
profiling (its independent sibling), judging, runner, pool, queued or backends: the pool and the
sandbox use it. The layers contract in pyproject.toml checks this."""
