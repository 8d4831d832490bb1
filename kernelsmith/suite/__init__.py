"""The bundled task suite: H200-sized KernelBench tasks, and their CPU-sized versions for the interpreter."""
