"""Seeds from torch.compile's own code: Inductor's output for a task, made a self-contained candidate.

record.py holds what one Inductor compilation left (its output code and the launch configs it
chose); inductor.py runs Inductor on a task to get one; transform.py turns a record into the source
of a KernelBench candidate (plain `@triton.jit` kernels launched with explicit grids); seed.py is
the step `kernelsmith seed` calls.
"""
