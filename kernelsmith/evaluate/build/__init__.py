"""CUDA C++ (and C++) extension builds as their own stage: specs read from a candidate's source
(spec.py), a contained builder (builder.py), a pool of them on the CPU cores (pool.py), the
content-addressed cache they publish to (cache.py), and the sandbox's load_inline that uses it
(hook.py)."""
