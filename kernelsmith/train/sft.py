"""Supervised fine-tuning on `kernelsmith data sft` rows (steps that made a correct, faster child)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from kernelsmith.errors import UserError
from kernelsmith.train.common import (
    auto_bf16,
    checkpointing,
    load_local,
    lora_config,
    model_dir,
    require_train_extra,
    save,
    summarize,
)
from kernelsmith.train.data import sft_dataset

if TYPE_CHECKING:
    from peft import PeftModel


def _check_assistant_masks(tokenizer, where: Path) -> None:
    """Assistant-only loss needs `{% generation %}` markers; TRL patches the templates it knows."""
    from trl.chat_template_utils import get_training_chat_template, has_generation_markers

    if has_generation_markers(tokenizer.chat_template):
        return
    try:
        get_training_chat_template(tokenizer)
    except ValueError:
        raise UserError(
            f"--model {where}: its chat template has no {{% generation %}} markers and TRL cannot "
            "patch it; pass --no-assistant-only-loss to train on whole conversations"
        ) from None


def train_sft(
    model_path: str | Path,
    data_file: str | Path,
    out_dir: str | Path,
    *,
    lora: bool = True,
    lora_r: int = 16,
    lora_alpha: int = 32,
    lora_dropout: float = 0.05,
    target_modules: list[str] | str | None = None,
    epochs: float = 1.0,
    max_steps: int = -1,
    lr: float = 2e-4,
    batch_size: int = 1,
    grad_accum: int = 1,
    max_length: int = 4096,
    seed: int = 0,
    logging_steps: int = 1,
    bf16: bool | None = None,
    assistant_only_loss: bool = True,
    gradient_checkpointing: bool = True,
    merge: bool = False,
) -> dict[str, Any]:
    """Train with TRL's SFTTrainer (LoRA on all linear layers by default); save the adapter, or the
    whole model with `lora=False`, and the tokenizer to `out_dir`.

    The loss covers the assistant's reply only (`assistant_only_loss`): the prompts are long and
    the same for many rows. Sequences are cut at `max_length` tokens from the end, so keep it above
    the longest row. With `merge` (LoRA only), the adapter merged into the base model is also saved
    to `out_dir/merged`: a plain model directory for `train grpo --model` or an inference server.
    Returns `summarize`'s dict: steps, final_loss, losses, tokens_per_s, output (and merged)."""
    require_train_extra()  # first: without the extra, nothing else can be fixed usefully
    where = model_dir(model_path)
    dataset = sft_dataset(data_file)
    bf16 = auto_bf16(bf16)
    model, tokenizer = load_local(where, bf16)
    if assistant_only_loss:
        _check_assistant_masks(tokenizer, where)

    from trl import SFTConfig, SFTTrainer  # pyright: ignore[reportPrivateImportUsage]  # trl's lazy exports

    out = Path(out_dir)
    config = SFTConfig(
        output_dir=str(out),
        num_train_epochs=epochs,
        max_steps=max_steps,
        learning_rate=lr,
        per_device_train_batch_size=batch_size,
        gradient_accumulation_steps=grad_accum,
        max_length=max_length,
        seed=seed,
        logging_steps=logging_steps,
        bf16=bf16,
        assistant_only_loss=assistant_only_loss,
        save_strategy="no",
        report_to="none",
        **checkpointing(SFTConfig, gradient_checkpointing),
    )
    trainer = SFTTrainer(
        model=model,
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=lora_config(lora_r, lora_alpha, lora_dropout, target_modules) if lora else None,
    )
    result = trainer.train()
    save(trainer, tokenizer, out)
    summary = summarize(trainer, result, out)
    if merge and lora:
        merged = out / "merged"
        peft_model = cast("PeftModel", trainer.model)  # with a peft_config, SFTTrainer wraps the model in PEFT
        peft_model.merge_and_unload().save_pretrained(str(merged))
        tokenizer.save_pretrained(str(merged))
        summary["merged"] = str(merged)
    return summary
