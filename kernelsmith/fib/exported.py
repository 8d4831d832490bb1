"""What an export makes of a task (its Definition, Workloads, blobs and the binding a Solution's run()
needs), and reading a task's source for it: its module constants, an imported task's reference."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

import torch
from flashinfer_bench.data import Definition, Workload

from kernelsmith.fib.shim import Binding
from kernelsmith.fib.task_text import NO_FINAL_NEWLINE, REFERENCE_END, REFERENCE_START


@dataclass
class Exported:
    """A task's Definition, its Workloads and their blobs, and how a Solution's run() reaches a ModelNew."""

    definition: Definition
    workloads: list[Workload]
    sources: list[str]  # the task's source at each workload (as written, shrunk), in the workloads' order
    binding: Binding  # run()'s binding to the task's Model: a Solution's takes ModelNew in its place
    blobs: dict[str, dict[str, torch.Tensor]] = field(default_factory=dict)  # relative path -> tensors
    notes: dict[int, str] = field(default_factory=dict)  # a workload's index -> what a Trace on it adds to its log


def module_ints(source: str) -> dict[str, int]:
    """The task's module-level `NAME = <int>` constants."""
    out = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if isinstance(node.value, ast.Constant) and type(node.value.value) is int:
                out[node.targets[0].id] = node.value.value
    return out


def module_string(source: str, name: str) -> str | None:
    """The value of a module-level `NAME = '<string>'`, or None."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if (
                node.targets[0].id == name
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
            ):
                return node.value.value
    return None


def is_imported(source: str) -> bool:
    """Whether `kernelsmith import-fib` wrote this task (it carries its Definition)."""
    return module_string(source, "FIB_DEFINITION") is not None


def reference_of(source: str) -> str:
    """The reference an imported task holds, as written."""
    start, end = source.index(REFERENCE_START), source.index(REFERENCE_END)
    block = source[start:end].split("\n", 1)[1]
    found = re.search(r"^_REFERENCE = (.*)$", block, re.MULTILINE)
    if found:
        return ast.literal_eval(found.group(1))
    return block[:-1] if source[end + len(REFERENCE_END) :].startswith(NO_FINAL_NEWLINE) else block
