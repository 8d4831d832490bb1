"""GRPO on `kernelsmith data rl` prompts, rewarded by the evaluator (the Kernel-Smith recipe:
`num_generations` samples per prompt, reward = speedup relative to the parent).

Batch arithmetic. TRL counts its batches in completions, not prompts: one optimizer step trains
on one *generation batch* of `prompts_per_step * num_generations` completions (every prompt's
whole group, which GRPO needs to compare samples of one prompt), split into micro-batches of
`batch_size` completions per process. So `batch_size * processes` must divide the generation
batch, and gradient accumulation is derived: generation batch / (batch_size * processes). TRL then
takes `steps_per_generation` = gradient accumulation, i.e. one generation per optimizer step,
fully on-policy.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

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
from kernelsmith.train.data import rl_dataset


def accumulation_steps(prompts_per_step: int, num_generations: int, batch_size: int, processes: int = 1) -> int:
    """Gradient accumulation that makes one optimizer step = one full generation batch (see above)."""
    if num_generations < 2:
        raise UserError(f"--num-generations {num_generations}: GRPO compares samples of a prompt, it needs at least 2")
    if prompts_per_step < 1 or batch_size < 1:
        raise UserError("--prompts-per-step and --batch-size must be at least 1")
    generation = prompts_per_step * num_generations
    micro = batch_size * processes
    if generation % micro:
        raise UserError(
            f"--batch-size {batch_size} x {processes} process(es) = {micro} completions must divide "
            f"--prompts-per-step {prompts_per_step} x --num-generations {num_generations} = {generation}"
        )
    return generation // micro


def train_grpo(
    model_path: str | Path,
    data_file: str | Path,
    out_dir: str | Path,
    reward: Callable[..., list[float]],
    *,
    num_generations: int = 8,
    prompts_per_step: int = 4,
    batch_size: int = 8,
    max_steps: int = -1,
    epochs: float = 1.0,
    lr: float = 1e-6,
    max_completion_length: int = 4096,
    temperature: float = 1.0,
    beta: float = 0.0,
    lora: bool = True,
    lora_r: int = 16,
    lora_alpha: int = 32,
    lora_dropout: float = 0.05,
    target_modules: list[str] | str | None = None,
    seed: int = 0,
    logging_steps: int = 1,
    bf16: bool | None = None,
    gradient_checkpointing: bool = True,
    log_completions: bool = False,
) -> dict[str, Any]:
    """Train with TRL's GRPOTrainer and `reward` (a `SpeedupReward`, or any TRL reward function);
    save the adapter (or the whole model with `lora=False`) and the tokenizer to `out_dir`.

    `beta` is the KL weight to the starting model (TRL's default 0: no reference model is kept).
    Returns `summarize`'s dict (steps, final_loss, tokens_per_s, output) plus the logged mean rewards."""
    require_train_extra()  # first: without the extra, nothing else can be fixed usefully
    where = model_dir(model_path)
    processes = int(os.environ.get("WORLD_SIZE", "1"))  # set by accelerate/torchrun for multi-GPU training
    grad_accum = accumulation_steps(prompts_per_step, num_generations, batch_size, processes)
    dataset = rl_dataset(data_file)
    bf16 = auto_bf16(bf16)
    model, tokenizer = load_local(where, bf16)

    from trl import GRPOConfig, GRPOTrainer  # pyright: ignore[reportPrivateImportUsage]  # trl's lazy exports

    out = Path(out_dir)
    config = GRPOConfig(
        output_dir=str(out),
        num_generations=num_generations,
        per_device_train_batch_size=batch_size,
        gradient_accumulation_steps=grad_accum,
        max_steps=max_steps,
        num_train_epochs=epochs,
        learning_rate=lr,
        max_completion_length=max_completion_length,
        temperature=temperature,
        beta=beta,
        seed=seed,
        logging_steps=logging_steps,
        bf16=bf16,
        save_strategy="no",
        report_to="none",
        log_completions=log_completions,
        **checkpointing(GRPOConfig, gradient_checkpointing),
    )
    trainer = GRPOTrainer(
        model=model,
        # TRL's RewardFunc returns list[float | None]; a list[float] is fine (the list is only read).
        reward_funcs=cast("Callable[..., list[float | None]]", reward),
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=lora_config(lora_r, lora_alpha, lora_dropout, target_modules) if lora else None,
    )
    result = trainer.train()
    save(trainer, tokenizer, out)
    return summarize(trainer, result, out)
