"""Factories for `kernelsmith capture`: a Hugging Face Llama with random weights (no download).

    kernelsmith capture examples/llama_decode/model.py:decode_step --out captures/decode --device cuda

`decode_step` (batch 1), `decode_step_b32` and `prefill` (2,048 tokens) use Llama-3-8B widths (hidden
4096, 32 heads, 8 KV heads, intermediate 14336) with 2 layers in bf16; decode steps start from a KV cache
of 1,024 random tokens. `tiny_decode_step` and `tiny_prefill` are the same code at a tiny float32 config
for the CPU (CI). Each factory takes `device` (capture passes its --device); without it, the device is
$KERNELSMITH_DEVICE, else cuda when there is one. Needs `pip install 'kernelsmith[capture]'`.
"""

from __future__ import annotations

import inspect
import os

import torch

LLAMA3_8B_WIDTHS = dict(
    hidden_size=4096,
    num_attention_heads=32,
    num_key_value_heads=8,
    intermediate_size=14336,
    vocab_size=128256,
    rope_theta=500000.0,
)
TINY_WIDTHS = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, intermediate_size=160, vocab_size=256)


def _device(device: str | None) -> str:
    return device or os.environ.get("KERNELSMITH_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")


def _llama(widths: dict, dtype: torch.dtype, device: str, layers: int = 2):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(**widths, num_hidden_layers=layers, max_position_embeddings=8192, attn_implementation="sdpa")
    torch.manual_seed(0)
    with torch.device(device):
        model = LlamaForCausalLM(config).to(dtype).eval()
    return model


def _decode(widths: dict, dtype: torch.dtype, device: str, batch: int, cached: int):
    """One decode step: `batch` sequences of one new token each after `cached` tokens in the cache."""
    from transformers import DynamicCache

    model = _llama(widths, dtype, device)
    cfg = model.config
    head_dim = cfg.hidden_size // cfg.num_attention_heads
    cache = DynamicCache(config=cfg)
    for layer in range(cfg.num_hidden_layers):
        k, v = (torch.randn(batch, cfg.num_key_value_heads, cached, head_dim, dtype=dtype, device=device) for _ in "kv")
        cache.update(k, v, layer)
    inputs = dict(
        input_ids=torch.randint(0, cfg.vocab_size, (batch, 1), device=device),
        position_ids=torch.full((batch, 1), cached, device=device),
        use_cache=True,
    )
    # transformers 5 takes the cache as `cache` (`past_key_values` warns, and goes in 5.40) and reads no
    # `cache_position`; transformers 4 takes `past_key_values` and `cache_position`.
    if "cache" in inspect.signature(type(model).forward).parameters:
        inputs["cache"] = cache
    else:
        inputs |= dict(past_key_values=cache, cache_position=torch.tensor([cached], device=device))
    return model, inputs


def _prefill(widths: dict, dtype: torch.dtype, device: str, tokens: int):
    """The prompt's forward: `tokens` tokens at once, logits for the last one (as a server asks)."""
    model = _llama(widths, dtype, device)
    ids = torch.randint(0, model.config.vocab_size, (1, tokens), device=device)
    return model, dict(input_ids=ids, use_cache=False, logits_to_keep=1)


def decode_step(device: str | None = None, batch: int = 1, cached: int = 1024):
    return _decode(LLAMA3_8B_WIDTHS, torch.bfloat16, _device(device), batch=batch, cached=cached)


def decode_step_b32(device: str | None = None):
    return _decode(LLAMA3_8B_WIDTHS, torch.bfloat16, _device(device), batch=32, cached=1024)


def prefill(device: str | None = None):
    return _prefill(LLAMA3_8B_WIDTHS, torch.bfloat16, _device(device), tokens=2048)


def tiny_decode_step(device: str | None = None, batch: int = 2, cached: int = 16):
    """`batch` and `cached` are the shapes a server varies: `kernelsmith capture ... --shape batch=1 --shape
    batch=4` captures the step at both, and its tasks hold both (docs/capture.md, "Shapes a server sees")."""
    return _decode(TINY_WIDTHS, torch.float32, _device(device or "cpu"), batch=batch, cached=cached)


def tiny_prefill(device: str | None = None):
    return _prefill(TINY_WIDTHS, torch.float32, _device(device or "cpu"), tokens=12)
