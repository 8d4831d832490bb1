"""`kernelsmith doctor`: which of the sandbox's five containment guarantees hold on this host."""

from __future__ import annotations

import sys

import typer
from rich.table import Table

from kernelsmith.cli.common import console
from kernelsmith.device import NO_CUDA_GPU, Device
from kernelsmith.errors import UserError


def doctor_cmd(
    device: Device = typer.Option(Device.cpu, help="the sandbox to check: cpu, or cuda (needs a GPU)"),
    json_out: bool = typer.Option(False, "--json", help="print the findings as one JSON object on the last line"),
) -> None:
    """Which of the five containment guarantees hold here: claimed by the layers this host allows
    and tried live from inside a sandbox. Exit 0 when all hold, 1 when one does not (2: no GPU for --device cuda)."""
    from kernelsmith.evaluate.pool import visible_gpus
    from kernelsmith.evaluate.sandboxing import containment
    from kernelsmith.evaluate.sandboxing.doctor import checkup

    if device is Device.cuda and not visible_gpus():  # as EvalPool says it for every other command
        raise UserError(NO_CUDA_GPU)
    found = checkup(device.value)
    claims, live = found.plan.guarantees(), found.live_holds()
    ok = all(why is None for why in claims.values()) and all(v is not False for v in live.values())
    if json_out:
        import json

        sys.stdout.write(json.dumps(found.to_dict()) + "\n")
    else:
        table = Table(title=f"sandbox containment ({device.value}, KERNELSMITH_SANDBOX={found.plan.mode})")
        table.add_column("layer", style="bold")
        table.add_column("")
        for name, what in found.plan.summary()["layers"].items():
            table.add_row(name, what)
        console.print(table)
        table = Table()
        table.add_column("guarantee", style="bold")
        table.add_column("claimed")
        table.add_column("tried live")
        for g, text in containment.GUARANTEES.items():
            live_text = {None: "-", True: "[green]contained[/]", False: "[red]ESCAPED[/]"}[live[g]]
            tried = found.live.get(g, {})
            if live[g] is False:
                live_text += ": " + "; ".join(f"{k}: {v}" for k, v in tried.items() if v.startswith("allowed"))
            table.add_row(text, "[green]holds[/]" if claims[g] is None else f"[red]no[/]: {claims[g]}", live_text)
        console.print(table)
    raise typer.Exit(0 if ok else 1)
