"""Flags that several commands share (evolve, evolve-suite, bench, train grpo): where evaluations run."""

from __future__ import annotations

from enum import Enum

import typer


class EvalBackendKind(str, Enum):
    local = "local"
    ray = "ray"
    service = "service"


# The flags every evaluating command shares (evolve, evolve-suite, bench, train grpo).
EVAL_BACKEND = typer.Option(
    None,
    help="where evaluations run: local, ray (Ray actors, one per GPU) or service "
    "(a `kernelsmith serve` at --eval-url) \\[default: local]",
)
RAY_ADDRESS = typer.Option(None, help="Ray cluster to join (auto, ray://head:10001) \\[default: start one here]")
EVAL_URL = typer.Option(
    None, help="evaluate on the `kernelsmith serve` service at this URL (bearer token from $KERNELSMITH_TOKEN when set)"
)
