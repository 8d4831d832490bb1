"""What the SFT and GRPO entry points share: the optional dependencies, the local model, LoRA,
precision, and the summary of a finished run."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from kernelsmith.errors import UserError, one_line

TRAIN_EXTRA = "kernelsmith train needs the train extra: pip install 'kernelsmith[train]'"
_EXTRA_MODULES = ("trl", "peft", "transformers", "datasets", "accelerate")


def require_train_extra() -> None:
    """A clear line instead of an ImportError deep inside a trainer."""
    if any(importlib.util.find_spec(m) is None for m in _EXTRA_MODULES):
        raise UserError(TRAIN_EXTRA)


MODEL_FILES = "config.json, the weights (*.safetensors or *.bin) and the tokenizer's files"
_WEIGHTS = ("*.safetensors", "*.bin")


def model_dir(model_path: str | Path) -> Path:
    """Checked before seconds of imports: the model is a local directory with a config and weights."""
    path = Path(model_path)
    if not path.is_dir():
        raise UserError(f"--model {model_path}: no such model directory (kernelsmith train loads local models only)")
    if not any(path.iterdir()):
        raise UserError(f"--model {model_path}: the folder is empty; a local model folder holds {MODEL_FILES}")
    if not (path / "config.json").is_file():
        raise UserError(f"--model {model_path}: no config.json in it; a local model folder holds {MODEL_FILES}")
    if not any(next(path.glob(pattern), None) for pattern in _WEIGHTS):
        raise UserError(f"--model {model_path}: no weights in it; a local model folder holds {MODEL_FILES}")
    return path


def _one_line(exc: BaseException, limit: int = 300) -> str:
    """An exception's whole message on one line (transformers' end "from one of:" and list the
    rest on the next lines), cut at a word past `limit`."""
    return one_line(str(exc), limit) or type(exc).__name__


def auto_bf16(bf16: bool | None) -> bool:
    """None means: bf16 where a CUDA GPU supports it, else fp32 (the CPU, old GPUs)."""
    if bf16 is not None:
        return bf16
    import torch

    return torch.cuda.is_available() and torch.cuda.is_bf16_supported()


def load_local(path: Path, bf16: bool):
    """(model, tokenizer) from a local directory only: nothing is downloaded."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except (OSError, ValueError, KeyError) as exc:
        raise UserError(f"--model {path}: its tokenizer does not load: {_one_line(exc)}") from None
    try:
        model = AutoModelForCausalLM.from_pretrained(
            path, local_files_only=True, dtype=torch.bfloat16 if bf16 else torch.float32
        )
    except (OSError, ValueError, KeyError) as exc:
        raise UserError(f"--model {path}: not a loadable causal language model: {_one_line(exc)}") from None
    if not tokenizer.chat_template:
        raise UserError(f"--model {path}: the tokenizer has no chat template, and the data is conversational")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


def checkpointing(config_cls, on: bool) -> dict[str, Any]:
    """Activation checkpointing under the name this transformers knows (`gradient_checkpointing`
    is a deprecated alias since 5.x, and TRL's configs default it to True, which warns)."""
    import dataclasses

    names = {f.name for f in dataclasses.fields(config_cls)}
    return {"activation_checkpointing": on} if "activation_checkpointing" in names else {"gradient_checkpointing": on}


def lora_config(r: int, alpha: int, dropout: float, target_modules: list[str] | str | None):
    from peft import LoraConfig

    return LoraConfig(
        r=r,
        lora_alpha=alpha,
        lora_dropout=dropout,
        target_modules=target_modules or "all-linear",
        task_type="CAUSAL_LM",
    )


def summarize(trainer, train_output, out_dir: Path) -> dict[str, Any]:
    """Final loss, steps, trained tokens per second of training, where the result went.

    Tokens are TRL's `num_tokens` metric (every non-padding input token of the trained batches)."""
    history = trainer.state.log_history
    losses = [h["loss"] for h in history if "loss" in h]
    tokens = next((h["num_tokens"] for h in reversed(history) if "num_tokens" in h), None)
    runtime = train_output.metrics.get("train_runtime")
    rewards = [h["reward"] for h in history if "reward" in h]
    summary = {
        "steps": train_output.global_step,
        "final_loss": losses[-1] if losses else train_output.training_loss,
        "losses": losses,
        "tokens": int(tokens) if tokens is not None else None,
        "train_runtime_s": runtime,
        "tokens_per_s": tokens / runtime if tokens and runtime else None,
        "output": str(out_dir),
    }
    if rewards:
        summary["rewards"] = rewards
    return summary


def save(trainer, tokenizer, out_dir: Path) -> None:
    """The adapter (LoRA) or the full model, and the tokenizer, into out_dir."""
    out_dir.mkdir(parents=True, exist_ok=True)
    trainer.save_model(str(out_dir))
    tokenizer.save_pretrained(str(out_dir))
