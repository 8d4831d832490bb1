"""`kernelsmith train sft|grpo`: thin wrappers over `train_sft` and `train_grpo`.

kernelsmith.cli.app mounts this with `app.add_typer(train_app, name="train")`. trl, peft and transformers
are imported only when a command runs, so `kernelsmith --help` stays fast and works without the
`train` extra.
"""

from __future__ import annotations

from pathlib import Path

import typer

from kernelsmith.cli.common import (
    EVAL_BACKEND,
    EVAL_URL,
    RAY_ADDRESS,
    EvalBackendKind,
    console,
    shown,
)
from kernelsmith.device import Device
from kernelsmith.errors import UserError
from kernelsmith.progress import counted

train_app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Post-train a model on the search's data: SFT, then GRPO with the speedup reward.",
)


def _fmt(x: float | None, digits: int = 4) -> str:
    return "-" if x is None else f"{x:.{digits}g}"


def _print_summary(kind: str, summary: dict) -> None:
    line = (
        f"{kind}: {counted(summary['steps'], 'step')}, final loss {_fmt(summary['final_loss'])}, "
        f"{_fmt(summary['tokens_per_s'])} tokens/s"
    )
    if summary.get("rewards"):
        line += f", last mean reward {_fmt(summary['rewards'][-1])}"
    console.print(f"{line} -> {shown(summary['output'])}", highlight=False, soft_wrap=True)


@train_app.command("sft")
def sft_command(
    model: Path = typer.Option(..., "--model", help="Local model directory (nothing is downloaded)."),
    data: Path = typer.Option(..., "--data", help="JSONL made by `kernelsmith data sft`."),
    out: Path = typer.Option(..., "--out", help="Where the adapter (or model) and tokenizer go."),
    lora: bool = typer.Option(True, "--lora/--no-lora", help="Train a LoRA adapter, or the full model."),
    lora_r: int = typer.Option(16, "--lora-r", min=1),
    epochs: float = typer.Option(1.0, "--epochs", min=0.0),
    max_steps: int = typer.Option(-1, "--max-steps", help="Stop after this many steps (-1: run the epochs)."),
    lr: float = typer.Option(2e-4, "--lr", min=0.0),
    batch_size: int = typer.Option(1, "--batch-size", min=1),
    grad_accum: int = typer.Option(1, "--grad-accum", min=1),
    max_length: int = typer.Option(4096, "--max-length", min=16, help="Tokens per sequence; longer ones are cut."),
    assistant_only_loss: bool = typer.Option(
        True, "--assistant-only-loss/--no-assistant-only-loss", help="Loss on the assistant's reply only."
    ),
    merge: bool = typer.Option(
        False, "--merge", help="Also save the LoRA adapter merged into the model, to OUT/merged."
    ),
    seed: int = typer.Option(0, "--seed"),
) -> None:
    """Supervised fine-tuning on the correct, faster steps of the search."""
    from kernelsmith.train.sft import train_sft

    summary = train_sft(
        model,
        data,
        out,
        lora=lora,
        lora_r=lora_r,
        lora_alpha=2 * lora_r,
        epochs=epochs,
        max_steps=max_steps,
        lr=lr,
        batch_size=batch_size,
        grad_accum=grad_accum,
        max_length=max_length,
        assistant_only_loss=assistant_only_loss,
        seed=seed,
        merge=merge,
    )
    _print_summary("sft", summary)


@train_app.command("grpo")
def grpo_command(
    model: Path = typer.Option(..., "--model", help="Local model directory (e.g. the SFT output, merged)."),
    data: Path = typer.Option(..., "--data", help="JSONL made by `kernelsmith data rl`."),
    out: Path = typer.Option(..., "--out", help="Where the adapter (or model) and tokenizer go."),
    num_generations: int = typer.Option(8, "--num-generations", min=2, help="Samples per prompt."),
    prompts_per_step: int = typer.Option(4, "--prompts-per-step", min=1),
    batch_size: int = typer.Option(
        8, "--batch-size", min=1, help="Completions per micro-batch; must divide prompts-per-step x num-generations."
    ),
    max_steps: int = typer.Option(-1, "--max-steps", help="Stop after this many steps (-1: one epoch)."),
    lr: float = typer.Option(1e-6, "--lr", min=0.0),
    max_completion_length: int = typer.Option(4096, "--max-completion-length", min=1),
    temperature: float = typer.Option(1.0, "--temperature", min=0.0),
    beta: float = typer.Option(0.0, "--beta", min=0.0, help="KL weight to the starting model."),
    lora: bool = typer.Option(True, "--lora/--no-lora"),
    lora_r: int = typer.Option(16, "--lora-r", min=1),
    device: Device = typer.Option(Device.cuda, "--device", help="Where the reward's evaluations run."),
    workers: int | None = typer.Option(
        None, "--workers", min=1, help="Evaluation workers (default: one per visible GPU, 1 on the CPU)."
    ),
    eval_gpus: str | None = typer.Option(
        None,
        "--eval-gpus",
        help="Comma-separated GPU ids for evaluation, e.g. 1,2,3 (keep timing off the training GPU).",
    ),
    eval_timeout: float = typer.Option(180.0, "--eval-timeout", min=1.0, help="Seconds per candidate evaluation."),
    eval_backend: EvalBackendKind | None = EVAL_BACKEND,
    ray_address: str | None = RAY_ADDRESS,
    eval_url: str | None = EVAL_URL,
    max_reward: float = typer.Option(10.0, "--max-reward", min=0.0, help="Rewards are clipped to [0, this]."),
    seed: int = typer.Option(0, "--seed"),
) -> None:
    """GRPO: sample, evaluate each sample's speedup over its parent, reinforce the faster ones."""
    from contextlib import closing

    from kernelsmith.evaluate.backends import backend_from_flags, open_backend
    from kernelsmith.evaluate.options import EvalOptions
    from kernelsmith.train.common import model_dir, require_train_extra
    from kernelsmith.train.grpo import accumulation_steps, train_grpo
    from kernelsmith.train.reward import SpeedupReward

    # what can fail in a second fails before the evaluation pool starts
    require_train_extra()
    model_dir(model)
    if not data.is_file():
        raise UserError(f"--data {data}: no such data file")
    if max_reward <= 0:
        raise UserError("--max-reward must be positive")
    accumulation_steps(prompts_per_step, num_generations, batch_size)
    gpus = [g.strip() for g in eval_gpus.split(",") if g.strip()] if eval_gpus else None
    options = EvalOptions(device=device.value, timeout=eval_timeout)
    backend = backend_from_flags(eval_backend.value if eval_backend else None, ray_address, eval_url)
    with closing(open_backend(backend, device.value, workers, options, gpus)) as pool:
        summary = train_grpo(
            model,
            data,
            out,
            SpeedupReward(pool, options, max_reward),
            num_generations=num_generations,
            prompts_per_step=prompts_per_step,
            batch_size=batch_size,
            max_steps=max_steps,
            lr=lr,
            max_completion_length=max_completion_length,
            temperature=temperature,
            beta=beta,
            lora=lora,
            lora_r=lora_r,
            lora_alpha=2 * lora_r,
            seed=seed,
        )
    _print_summary("grpo", summary)
