"""Factories for `kernelsmith optimize` on models served in half precision, built as a user builds them
from their configs with random weights (no download): the two models on which an H100 found issue 54's
slower eager patch (ViT) and worker crash (GPT-2).

    kernelsmith optimize benchmarks/device/models/half_models.py:vit_fp16 --device cuda --budget 2m \\
        --mode eager --mode compile --mode graphs

`vit_fp16`: ViTModel at ViT-B/16's widths (768 wide, 12 heads, intermediate 3,072, 224 x 224 images of 16 x
16 patches) with 4 layers, fp16, a batch of 8 images. `gpt2_bf16`: GPT2LMHeadModel at GPT-2 small's widths
with 2 layers, bf16, 8 sequences of 128 tokens (the cache off). `tiny_vit`, `tiny_gpt2` are the same code at
a tiny config in float32 for the CPU. Each factory takes `device` (capture passes its --device).
"""

from __future__ import annotations

import torch

VIT_B16 = dict(hidden_size=768, num_attention_heads=12, intermediate_size=3072, image_size=224, patch_size=16)
GPT2_SMALL = dict(n_embd=768, n_head=12, vocab_size=50257, n_positions=1024)


def _device(device: str | None) -> str:
    return device or ("cuda" if torch.cuda.is_available() else "cpu")


def _vit(widths: dict, layers: int, batch: int, dtype: torch.dtype, device: str):
    from transformers import ViTConfig, ViTModel

    config = ViTConfig(**widths, num_hidden_layers=layers, attn_implementation="sdpa")
    torch.manual_seed(0)
    with torch.device(device):
        model = ViTModel(config).eval().to(dtype)
    size = config.image_size
    pixels = torch.randn(batch, config.num_channels, size, size, device=device, dtype=dtype)
    return model, dict(pixel_values=pixels)


def _gpt2(widths: dict, layers: int, batch: int, tokens: int, dtype: torch.dtype, device: str):
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(**widths, n_layer=layers, attn_implementation="sdpa")
    torch.manual_seed(0)
    with torch.device(device):
        model = GPT2LMHeadModel(config).eval().to(dtype)
    ids = torch.randint(0, config.vocab_size, (batch, tokens), device=device)
    return model, dict(input_ids=ids, use_cache=False)


def vit_fp16(device: str | None = None):
    return _vit(VIT_B16, 4, 8, torch.float16, _device(device))


def gpt2_bf16(device: str | None = None):
    return _gpt2(GPT2_SMALL, 2, 8, 128, torch.bfloat16, _device(device))


def tiny_vit(device: str | None = None):
    tiny = dict(hidden_size=64, num_attention_heads=4, intermediate_size=128, image_size=32, patch_size=8)
    return _vit(tiny, 2, 2, torch.float32, device or "cpu")


def tiny_gpt2(device: str | None = None):
    return _gpt2(dict(n_embd=64, n_head=4, vocab_size=256, n_positions=64), 2, 2, 16, torch.float32, device or "cpu")
