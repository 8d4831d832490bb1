"""`kernelsmith capture`: a model's forward, recorded at the ATen level, ranked by where its time goes
and cut into the regions a kernel would fuse, each written as a KernelBench-format task (docs/capture.md)."""

# Profiled forwards a capture ranks on by default (`--forwards`: their median), defined once for capture,
# optimize and the CLI: on a loaded machine 5 moved a region's share up to 20x between two captures (issue
# 55). More cost little: a profiled forward of the models capture runs is milliseconds on the CPU.
FORWARDS = 9
