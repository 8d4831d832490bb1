"""A factory's inputs go to the device with the model, the tensors that objects hold too (capture/entry.py, to_device).

A Qwen2 decode step whose DynamicCache was built on the CPU failed under `--device cuda` with "Expected all
tensors to be on the same device" (issue 54): the model and the plain tensors moved, the cache did not.
There is no GPU here: `meta` stands in for it (a forward runs there on shapes alone, and refuses a CPU
tensor beside its meta ones as CUDA does)."""

from __future__ import annotations

import copy
import textwrap
from collections import OrderedDict, namedtuple
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from kernelsmith.capture.entry import call_entry, to_device
from kernelsmith.capture.run import capture

QWEN_STEP = """
import inspect

import torch


def _model():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        hidden_size=64, num_attention_heads=4, num_key_value_heads=2, intermediate_size=160, vocab_size=256,
        num_hidden_layers=2, max_position_embeddings=256,
    )
    torch.manual_seed(0)
    return Qwen2ForCausalLM(config).eval()


def _cached(model, cache, **extra):
    # transformers 5 takes the cache as `cache` (`past_key_values` warns), transformers 4 as `past_key_values`
    name = "cache" if "cache" in inspect.signature(type(model).forward).parameters else "past_key_values"
    return {name: cache, "use_cache": True, **extra}


def decode_step():
    '''Written for the CPU, as a user writes it: takes no device; its cache prefilled with 7 tokens.'''
    from transformers import DynamicCache

    model = _model()
    cache = DynamicCache(config=model.config)
    with torch.no_grad():
        model(input_ids=torch.randint(0, 256, (2, 7)), **_cached(model, cache))
    return model, dict(input_ids=torch.randint(0, 256, (2, 1)), **_cached(model, cache))


def static_decode_step():
    from transformers import StaticCache

    model = _model()
    cache = StaticCache(config=model.config, max_cache_len=16)
    with torch.no_grad():
        model(input_ids=torch.randint(0, 256, (2, 7)), **_cached(model, cache))
    return model, dict(input_ids=torch.randint(0, 256, (2, 1)), **_cached(model, cache), position_ids=torch.full((2, 1), 7))
"""


@pytest.fixture(scope="module")
def qwen_step(tmp_path_factory) -> Path:
    pytest.importorskip("transformers")
    path = tmp_path_factory.mktemp("qwen") / "qwen_step.py"
    path.write_text(textwrap.dedent(QWEN_STEP))
    return path


def _tensors(value, seen=None) -> list[torch.Tensor]:
    """Every tensor `value` holds, through containers and objects' attributes (what the test checks moved)."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return []
    seen.add(id(value))
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v, seen)]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v, seen)]
    if hasattr(value, "__dict__") and not isinstance(value, (type, torch.nn.Module)):
        return _tensors(vars(value), seen)
    return []


@pytest.mark.parametrize("factory", ["decode_step", "static_decode_step"])
def test_a_decode_step_written_for_the_cpu_runs_where_the_model_is_sent_its_cache_with_it(qwen_step, factory):
    entry = call_entry(f"{qwen_step}:{factory}", "meta")
    cache = next(v for k, v in entry.kwargs.items() if k in ("cache", "past_key_values"))
    held = _tensors(cache)
    assert held and all(t.device.type == "meta" for t in held), {t.device for t in held}
    assert all(layer.keys.shape[-2] in (7, 16) for layer in cache.layers)  # the prefill's tokens, moved
    assert all(getattr(layer, "device", torch.device("meta")).type == "meta" for layer in cache.layers)
    args, kwargs = copy.deepcopy((entry.args, entry.kwargs))  # capture and apply copy the inputs per forward
    with torch.no_grad():
        out = entry.model(*args, **kwargs)  # on the CPU's cache this raised: devices differ
    assert out.logits.device.type == "meta" and out.logits.shape == (2, 1, 256)


def test_an_encoder_decoder_cache_moves_both_its_caches():
    transformers = pytest.importorskip("transformers")
    cache = transformers.EncoderDecoderCache(transformers.DynamicCache(), transformers.DynamicCache())
    cache.self_attention_cache.update(torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 4), 0)
    cache.cross_attention_cache.update(torch.randn(1, 2, 5, 4), torch.randn(1, 2, 5, 4), 0)
    (moved,) = to_device((cache,), "meta")
    assert moved is cache  # moved in place: the model's forward and the caller hold the same cache
    held = _tensors(cache)
    assert len(held) >= 4 and all(t.device.type == "meta" for t in held)


Pair = namedtuple("Pair", "k v")


@dataclass(frozen=True)
class Frozen:
    t: torch.Tensor


class OldCache:
    """As transformers 4's DynamicCache: lists of tensors, one per layer; and a reference to itself."""

    def __init__(self):
        shared = torch.ones(2)
        self.key_cache = [torch.zeros(1, 2), shared]
        self.value_cache = [torch.zeros(1, 2), shared]
        self.device = torch.device("cpu")
        self.me = self
        self.frozen = Frozen(torch.ones(3))
        self.by_name = OrderedDict(a=torch.ones(1))
        self.pair = Pair(torch.ones(1), 3)


def test_objects_that_hold_tensors_have_them_moved_in_place_sharing_kept():
    old = OldCache()
    key_list = old.key_cache
    args, kwargs = to_device(((torch.ones(1), [old]), {"n": 3, "x": (torch.ones(2),)}), "meta")
    assert args[0].is_meta and args[1][0] is old and kwargs["n"] == 3 and kwargs["x"][0].is_meta
    assert old.key_cache is key_list and all(t.is_meta for t in old.key_cache + old.value_cache)
    assert old.key_cache[1] is old.value_cache[1]  # one tensor in two places stays one
    assert old.device == torch.device("meta") and old.me is old
    assert old.frozen.t.is_meta and old.by_name["a"].is_meta
    assert isinstance(old.pair, Pair) and old.pair.k.is_meta and old.pair.v == 3
    # A list given as an input of its own and held by an object: the object's gets the moved tensors too.
    again = OldCache()
    to_device((again.key_cache, again), "meta")
    assert all(t.is_meta for t in again.key_cache)
    top = torch.max(torch.ones(2, 3), dim=1)  # a structseq
    (moved,) = to_device((top,), "meta")
    assert type(moved) is type(top) and moved.values.is_meta and moved.indices.is_meta


def test_capture_runs_a_decode_step_with_its_cache_end_to_end_on_the_cpu(qwen_step, tmp_path: Path):
    done = capture(f"{qwen_step}:decode_step", tmp_path / "cap", "cpu", forwards=1)
    written = [t for t in done.tasks if t.file]
    assert written and all(t.validated for t in written), [(t.name, t.why) for t in done.tasks]
    assert any(t.module_class == "Qwen2RMSNorm" for t in written), [t.module_class for t in written]
    assert any(any("scaled_dot_product" in op for op in t.ops) for t in done.tasks)  # attention over the cache
