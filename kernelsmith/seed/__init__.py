"""Seeds from torch.compile's own code: Inductor's output for a task, made a self-contained candidate.

inductor.py runs Inductor on a task to get its output code; record.py holds what one compilation left
(that code and the launch configs it chose); parse.py reads the code as a syntax tree (its kernels, its
`call(args)`); kernels.py makes each Triton kernel plain, grids.py writes each launch's grid out, and
wrapper.py makes `call(args)` a plain function; assemble.py puts them together as a KernelBench candidate;
seed.py is the step `kernelsmith seed` calls, start.py where a search starts without a seed, errors.py why
a task gets none.
"""
