"""`kernelsmith import-fib`: a flashinfer-trace dataset's Definitions, Workloads and Solutions as tasks and
candidates (docs/ecosystem.md).

DIR/<definition>_<axes>.py      one task per workload (or the --top N heaviest), task_text.py
DIR/solutions/<definition>/<solution>.py   each Solution as a candidate, candidate_text.py
DIR/blob/...                    safetensors inputs too large to write into a task, copied (a task names
                                them relative to its folder, and finds them there or through
                                $KERNELSMITH_FIB_BLOBS: the folder moves whole)
DIR/import.json                 what was imported from where, and each Solution that is not a candidate, with why

Everything is read and rendered before anything is written: a bad input (a safetensors file that is not
the workload's, a dtype flashinfer-bench does not know, a Solution whose entry point is missing) is a
UserError and leaves DIR as it was. A definition or Solution that kernelsmith cannot take is listed with
why, and the rest imported: a definition without workloads (most of flashinfer-trace's) or whose workload
reads a safetensors file that is not there (its git checkout keeps them on Hugging Face), one
flashinfer-bench judges other than element by element (sampling by its samples' distribution, fp8 MoE by
a share of matched elements: kernelsmith's judge would refuse every kernel it passes), float4 inputs, the
tvm-ffi binding, Python of several files.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

from flashinfer_bench.data import Definition, Workload

from kernelsmith.capture.outdir import check, prepare
from kernelsmith.errors import UserError
from kernelsmith.fib.candidate_text import candidate_text
from kernelsmith.fib.dtypes import TORCH_OF_FIB, Unmappable, name_of
from kernelsmith.fib.layout import Dataset, NoWorkloads, definition_path
from kernelsmith.fib.task_text import axis_values, input_idents, task_text

MANIFEST = "import.json"


@dataclass
class ImportedTask:
    file: str
    definition: str
    workload: str  # its uuid
    axes: dict[str, int]
    blobs: list[str] = field(default_factory=list)  # the safetensors files it reads, relative to its folder


@dataclass
class ImportedSolution:
    name: str
    definition: str
    author: str
    language: str
    file: str | None = None  # None: not a candidate (why says why)
    why: str | None = None


@dataclass
class Imported:
    dataset: str
    tasks: list[ImportedTask] = field(default_factory=list)
    solutions: list[ImportedSolution] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # definition -> why none of its workloads is a task


def weight(definition: Definition, workload: Workload) -> int:
    """Bytes of a workload's tensor inputs: how heavy it is (--top keeps the heaviest)."""
    sizes = axis_values(definition, workload)
    total = 0
    for spec in definition.inputs.values():
        if spec.shape is not None:
            dtype = TORCH_OF_FIB.get(name_of(spec.dtype))
            total += math.prod(sizes[a] for a in spec.shape) * (dtype.itemsize if dtype is not None else 1)
    return total


def _safe(name: str) -> str:
    return re.sub(r"\W", "_", name)


def _task_names(definition: Definition, workloads: list[Workload]) -> list[str]:
    """<definition>_<var axes and values>, with the workload's uuid where that is not unique."""
    names = [
        _safe(definition.name) + "".join(f"_{_safe(a)}{w.axes[a]}" for a in definition.var_axes if a in w.axes)
        for w in workloads
    ]
    return [n if names.count(n) == 1 else f"{n}_{w.uuid[:8]}" for n, w in zip(names, workloads)]


def _select(ds: Dataset, names: list[str] | None) -> list[Definition]:
    if not names:
        return list(ds.definitions.values())
    missing = [n for n in names if n not in ds.definitions]
    if missing:
        have = ", ".join(sorted(ds.definitions)[:8]) or "none"
        raise UserError(f"{ds.root} holds no definition {', '.join(missing)} (it holds {have})")
    return [ds.definitions[n] for n in dict.fromkeys(names)]


# flashinfer-bench's evaluators other than its default, and why kernelsmith's judge (every element within a
# tolerance of the reference's) would throw out every kernel they pass
JUDGED_OTHERWISE = {
    "SamplingEvaluator": "flashinfer-bench judges a sampling kernel by the distribution of its samples (their "
    "total variation distance from the reference's probabilities), and kernelsmith's judge compares outputs "
    "element by element, which no sampling kernel can pass",
    "LowBitEvaluator": "flashinfer-bench judges this low-bit kernel by the share of its elements within the "
    "tolerance (95%), and kernelsmith's judge wants every element within it",
}


def judged_otherwise(definition: Definition) -> str | None:
    """Why kernelsmith cannot judge `definition` as flashinfer-bench does (its own choice of evaluator), or None."""
    from flashinfer_bench.bench.evaluators import DefaultEvaluator, resolve_evaluator

    evaluator = resolve_evaluator(definition)
    if evaluator is DefaultEvaluator:
        return None
    name = evaluator.__name__
    return JUDGED_OTHERWISE.get(name, f"flashinfer-bench judges it with its {name}, which kernelsmith's judge is not")


def _render(ds: Dataset, definition: Definition, top: int | None, done: Imported, files: dict, blobs: dict):
    why = judged_otherwise(definition)
    if why is not None:
        done.skipped[definition.name] = why
        return
    try:
        workloads = ds.workloads(definition)
    except NoWorkloads as exc:
        done.skipped[definition.name] = str(exc)
        return
    if top is not None:
        workloads = sorted(workloads, key=lambda w: -weight(definition, w))[:top]
    # the definition's file within its dataset, named by the folder alone: the task holds no path of this machine
    source = f"{ds.root.resolve().name}/{definition_path(definition.op_type, definition.name)}"
    try:
        rendered = [task_text(definition, w, ds.root, source) for w in workloads]
    except (Unmappable, NoWorkloads) as exc:
        done.skipped[definition.name] = str(exc)
        return
    for name, w, r in zip(_task_names(definition, workloads), workloads, rendered):
        files[f"{name}.py"] = r.text
        blobs.update(r.blobs)
        done.tasks.append(ImportedTask(f"{name}.py", definition.name, w.uuid, dict(w.axes), list(r.blobs)))
    for s in ds.solutions.get(definition.name, []):
        entry = ImportedSolution(s.name, definition.name, s.author, s.spec.language.value)
        try:
            text = candidate_text(definition, s, input_idents(definition))
        except Unmappable as exc:
            entry.why = str(exc)
        else:
            entry.file = f"solutions/{_safe(definition.name)}/{_safe(s.name)}.py"
            files[entry.file] = text
        done.solutions.append(entry)


def _owned(out: Path, files: dict[str, str]) -> set[str]:
    """What an import writes in `out`, and what the one before it there wrote (its import.json's tasks)."""
    owned = {f.split("/")[0] for f in files} | {"solutions", "blob"}
    try:
        earlier = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
        owned |= {t["file"] for t in earlier.get("tasks", [])}
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        pass
    return owned


def import_fib(dataset: Path, out: Path, definitions: list[str] | None = None, top: int | None = None) -> Imported:
    """Import `definitions` (default: all) of the dataset at `dataset` into `out` (new, empty, or an earlier
    import: replaced). The task files are written to, and named in, `out`."""
    ds = Dataset.read(dataset)
    check(out, MANIFEST, _owned(out, {}), "import")
    done = Imported(str(dataset))
    files: dict[str, str] = {}
    blobs: dict[str, Path] = {}
    for definition in _select(ds, definitions):
        _render(ds, definition, top, done, files, blobs)
    if not done.tasks:
        why = "; ".join(f"{k}: {v}" for k, v in done.skipped.items()) or "it holds no definition"
        raise UserError(f"nothing to import from {dataset}: {why}")
    prepare(out, MANIFEST, _owned(out, files), "import")
    for rel, text in files.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text, encoding="utf-8")
    for rel, src in blobs.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, out / rel)
    (out / MANIFEST).write_text(json.dumps(asdict(done), indent=1) + "\n", encoding="utf-8")
    return done
