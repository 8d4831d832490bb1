"""kernelsmith: evolve fast, verified GPU kernels for PyTorch operators."""

__version__ = "0.1.0"
