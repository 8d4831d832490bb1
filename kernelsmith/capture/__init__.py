"""`kernelsmith capture`: a model's forward, recorded at the ATen level, ranked by where its time goes
and cut into the regions a kernel would fuse, each written as a KernelBench-format task (docs/capture.md)."""
