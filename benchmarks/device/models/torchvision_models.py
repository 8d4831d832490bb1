"""Factories for `kernelsmith capture`: torchvision's ResNet-18 and ConvNeXt-tiny as a user builds them
(`weights=None`: random weights, no download), in float32, on a batch of 8 images of 224 x 224.

    kernelsmith capture benchmarks/device/models/torchvision_models.py:resnet18 --out captures/resnet18 --device cuda

torchvision is imported inside each factory, so this file imports without it (the factory then
raises, and capture says so in one line). `tiny_resnet18` and `tiny_convnext_tiny` are the same
models on 1 image of 32 x 32 for the CPU. Each factory takes `device` (capture passes its --device);
without it, cuda when there is one.
"""

from __future__ import annotations

import torch

BATCH, SIDE = 8, 224


def _device(device: str | None) -> str:
    return device or ("cuda" if torch.cuda.is_available() else "cpu")


def _vision(name: str, batch: int, side: int, device: str):
    import torchvision.models  # lazily: the CPU machines of CI do not have it

    torch.manual_seed(0)
    with torch.device(device):
        model = getattr(torchvision.models, name)(weights=None).eval()
    return model, (torch.randn(batch, 3, side, side, device=device),)


def resnet18(device: str | None = None):
    return _vision("resnet18", BATCH, SIDE, _device(device))


def convnext_tiny(device: str | None = None):
    return _vision("convnext_tiny", BATCH, SIDE, _device(device))


def tiny_resnet18(device: str | None = None):
    return _vision("resnet18", 1, 32, device or "cpu")


def tiny_convnext_tiny(device: str | None = None):
    return _vision("convnext_tiny", 1, 32, device or "cpu")
