"""Factories for `kernelsmith capture`: Hugging Face GPT-2 and BERT as a user builds them from their
configs, with random weights (no download), in float32 (what `from_config` gives).

    kernelsmith capture benchmarks/device/models/transformers_models.py:gpt2 --out captures/gpt2 --device cuda

`gpt2`: GPT2LMHeadModel at GPT-2 small's widths (768 wide, 12 heads, vocabulary 50,257) with 6 layers
(distilgpt2's depth), a forward over 8 sequences of 128 tokens (no KV cache), the logits out.
`bert`: BertModel at BERT-base's widths (768 wide, 12 heads, intermediate 3,072) with 6 layers, 8
sequences of 128 tokens whose last quarter of the last four is padding (the attention mask holds
zeros). Fewer layers than the released models keep a compiled check inside one device call; a layer's
regions are the same in every layer, so the tasks are those of the full depth. `vit`: ViTModel at
ViT-B/16's widths (768 wide, 12 heads, intermediate 3,072, 224-pixel images in 16-pixel patches) with 4
layers, 8 images, in float16: the model issue 54 ran (`optimize` made its eager forward 2x slower on an
H100). `tiny_gpt2`, `tiny_bert` and `tiny_vit` are the same code at a tiny config for the CPU. Each
factory takes `device` (capture passes its --device); without it, cuda when there is one.
"""

from __future__ import annotations

import torch

GPT2_SMALL = dict(n_embd=768, n_head=12, vocab_size=50257, n_positions=1024)
BERT_BASE = dict(hidden_size=768, num_attention_heads=12, intermediate_size=3072, vocab_size=30522)
LAYERS = 6
BATCH, TOKENS = 8, 128


def _device(device: str | None) -> str:
    return device or ("cuda" if torch.cuda.is_available() else "cpu")


def _gpt2(widths: dict, layers: int, batch: int, tokens: int, device: str):
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(**widths, n_layer=layers, attn_implementation="sdpa")
    torch.manual_seed(0)
    with torch.device(device):
        model = GPT2LMHeadModel(config).eval()
    ids = torch.randint(0, config.vocab_size, (batch, tokens), device=device)
    return model, dict(input_ids=ids, use_cache=False)


def _bert(widths: dict, layers: int, batch: int, tokens: int, device: str):
    from transformers import BertConfig, BertModel

    config = BertConfig(**widths, num_hidden_layers=layers, attn_implementation="sdpa")
    torch.manual_seed(0)
    with torch.device(device):
        model = BertModel(config).eval()
    ids = torch.randint(0, config.vocab_size, (batch, tokens), device=device)
    mask = torch.ones(batch, tokens, dtype=torch.long, device=device)
    mask[batch - max(1, batch // 2) :, tokens - tokens // 4 :] = 0  # padded sequences, as a batch of a server has
    return model, dict(input_ids=ids, attention_mask=mask)


def _vit(widths: dict, layers: int, batch: int, dtype: torch.dtype, device: str):
    from transformers import ViTConfig, ViTModel

    config = ViTConfig(**widths, num_hidden_layers=layers, attn_implementation="sdpa")
    torch.manual_seed(0)
    with torch.device(device):
        model = ViTModel(config).eval().to(dtype)
    pixels = torch.randn(batch, 3, config.image_size, config.image_size, device=device, dtype=dtype)
    return model, (pixels,)


def gpt2(device: str | None = None):
    return _gpt2(GPT2_SMALL, LAYERS, BATCH, TOKENS, _device(device))


def bert(device: str | None = None):
    return _bert(BERT_BASE, LAYERS, BATCH, TOKENS, _device(device))


def tiny_gpt2(device: str | None = None):
    return _gpt2(dict(n_embd=64, n_head=4, vocab_size=256, n_positions=64), 2, 2, 16, device or "cpu")


def tiny_bert(device: str | None = None):
    tiny = dict(hidden_size=64, num_attention_heads=4, intermediate_size=128, vocab_size=256)
    return _bert(tiny, 2, 2, 16, device or "cpu")


def vit(device: str | None = None):
    widths = dict(hidden_size=768, num_attention_heads=12, intermediate_size=3072, image_size=224, patch_size=16)
    return _vit(widths, 4, 8, torch.float16, _device(device))


def tiny_vit(device: str | None = None):
    widths = dict(hidden_size=64, num_attention_heads=4, intermediate_size=128, image_size=32, patch_size=8)
    return _vit(widths, 2, 2, torch.float32, device or "cpu")
