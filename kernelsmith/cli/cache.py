"""`kernelsmith cache`: the baseline cache (the reference's and torch.compile's times per GPU, torch
version and task, and each card's measured ceilings): list its entries, the cards' ceilings beside their
datasheets', clear some or all of them."""

from __future__ import annotations

import json
import sys

import typer
from rich.table import Table

from kernelsmith.cli.common import console, fail, shown

cache_app = typer.Typer(no_args_is_help=True, add_completion=False)


@cache_app.command("list")
def cache_list_cmd(
    json_out: bool = typer.Option(False, "--json", help="one JSON object per entry, one per line"),
) -> None:
    """The stored baselines, oldest first: GPU, torch, task hash, the reference's and torch.compile's
    device time per call and how it was measured. Measured ceilings of a GPU are entries too."""
    from kernelsmith.evaluate.measuring.baseline_cache import BaselineCache

    cache = BaselineCache()
    entries = cache.entries()
    if json_out:
        for e in entries:
            sys.stdout.write(json.dumps(e.to_dict()) + "\n")
        return
    table = Table(title=f"baseline cache: {shown(cache.path)} ({len(entries)} entries)")
    for col in ("created (UTC)", "GPU", "torch", "task", "reference ms", "torch.compile ms", "method"):
        table.add_column(col)
    for e in entries:
        table.add_row(
            e.created,
            e.gpu,
            e.torch,
            e.task_hash[:12] or "(ceilings)",
            "-" if e.reference_ms is None else f"{e.reference_ms:.4g}",
            "-" if e.compile_ms is None else f"{e.compile_ms:.4g}",
            e.method or "-",
        )
    console.print(table)


@cache_app.command("ceilings")
def cache_ceilings_cmd(
    json_out: bool = typer.Option(False, "--json", help="one JSON object per card, one per line"),
) -> None:
    """Each card's ceilings as measured once by the copy and GEMM probes (the speed of light's: capture and the
    judge measure them on a card's first use), beside its datasheet's figures where they are known."""
    from dataclasses import asdict

    from kernelsmith.evaluate.measuring.baseline_cache import BaselineCache
    from kernelsmith.evaluate.measuring.roofline import amount, stored_cards

    cache = BaselineCache()
    cards = stored_cards(cache)
    if json_out:
        for torch_version, card in cards:
            sys.stdout.write(json.dumps({"torch": torch_version, **asdict(card)}) + "\n")
        return
    table = Table(title=f"measured ceilings: {shown(cache.path)} ({len(cards)} cards)")
    for col in ("card", "torch", "copy bandwidth", "datasheet", "bf16 GEMM", "datasheet (dense bf16)"):
        table.add_column(col)
    for torch_version, card in cards:
        sheet = card.datasheet
        table.add_row(
            shown(card.name),
            torch_version,
            amount(card.bandwidth, "B/s"),
            "-" if sheet is None else f"{amount(sheet.bandwidth, 'B/s')} ({sheet.part})",
            amount(card.flops, "FLOP/s"),
            "-" if sheet is None else amount(sheet.flops, "FLOP/s"),
        )
    console.print(table)


@cache_app.command("clear")
def cache_clear_cmd(
    task: str = typer.Option(None, "--task", help="entries of this task (its hash, or a prefix of it)"),
    gpu: str = typer.Option(None, "--gpu", help="entries of this GPU (its name as `cache list` shows it)"),
    all_entries: bool = typer.Option(False, "--all", help="every entry"),
) -> None:
    """Remove baselines: those of a task, of a GPU, or all; the next evaluation measures them anew."""
    from kernelsmith.evaluate.measuring.baseline_cache import BaselineCache

    if not (task or gpu or all_entries):
        fail("say which entries to clear: --task HASH, --gpu NAME or --all", 2)
    if all_entries and (task or gpu):
        fail("--all clears every entry: give it alone, or --task / --gpu without it", 2)
    removed = BaselineCache().clear(task_hash=task, gpu=gpu)
    console.print(f"removed {removed} {'entry' if removed == 1 else 'entries'}")
