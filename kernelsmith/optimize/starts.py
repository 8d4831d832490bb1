"""Each region's starting kernel, in this order: a seed from --seeds (a folder, by the task's name; or
`file.py:function`, called with the task file's path), the one an earlier run of the work directory kept
(OUT/seeds/NAME.py), for a region fused across the library boundary (--fused) our own Triton seed
(kernelsmith.seed.fused), torch.compile's own code on a GPU (`kernelsmith seed`, in its own process), and with
an LLM none (the LLM writes the first version). A search that has stored iterations keeps the start it
has. What the region gets is kept in OUT/seeds: NAME.py and, in NAME.txt, where it came from or why
there is none (torch.compile's seed step is not tried twice).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kernelsmith.capture.entry import load_factory
from kernelsmith.errors import UserError, one_line, raised_at
from kernelsmith.evaluate.pool import EvalBackend
from kernelsmith.evolve.store import RunStore, holds_run
from kernelsmith.identity import program_hash
from kernelsmith.seed.fused import fused_seed
from kernelsmith.seed.start import derive, llm_judged
from kernelsmith.task import Task

NO_SEED = "no starting kernel{why}"
OUR_FUSED_SEED = "kernelsmith's fused seed (kernelsmith.seed.fused)"


def start_advice(names: list[str], device: str) -> str:
    """What to do for the regions without a start, said once for them all (per region it made the table
    300-450 columns wide, issue 55)."""
    where = ", or run on --device cuda for torch.compile's own code" if device == "cpu" else ""
    return (
        f"no starting kernel for {', '.join(names)}: give --seeds (a folder of NAME.py, named as the region, or "
        f"file.py:function), an LLM (--model with --llm-base-url){where}"
    )


Seeder = Callable[[str, Path], tuple[str | None, str]]  # (task name, task file) -> (source or None, origin)


@dataclass
class Start:
    code: str | None  # None: the LLM's first version, or the start the run has stored
    origin: str  # in words
    note: str | None = None  # something the user should know (a --seeds seed not used)


def seeder(spec: str | None) -> Seeder | None:
    """--seeds as a function of the task: a folder's NAME.py (or NAME_seed.py), or `file.py:function`."""
    if spec is None:
        return None
    folder = Path(spec)
    if folder.is_dir():
        return lambda name, path: _from_folder(folder, name)
    if ":" not in spec:
        raise UserError(f"--seeds {spec}: not a folder, nor file.py:function")
    try:
        func = load_factory(spec)
    except UserError as exc:
        raise UserError("--seeds" + str(exc).removeprefix("ENTRY")) from None
    return lambda name, path: _from_function(func, spec, path)


def unmatched(spec: str | None, regions: dict[str, str | None]) -> str | None:
    """One line for the files of a --seeds folder that no searched region takes (a typo, a library op's
    region), which were otherwise ignored without a word (issue 55); None when every file is used.
    `regions`: every region of the capture -> why it is not searched (None: it is)."""
    folder = Path(spec) if spec is not None else None
    if folder is None or not folder.is_dir():
        return None
    searched = [name for name, why in regions.items() if why is None]
    stray = []
    for file in sorted(folder.glob("*.py")):
        name = file.stem if file.stem in regions else file.stem.removesuffix("_seed")
        if regions.get(name, "") is None:
            continue
        if name in regions:
            stray.append(f"{file.name} ({name}: {regions[name]})")
            continue
        near = difflib.get_close_matches(name, searched, n=1)
        stray.append(f"{file.name} (no region is named so{f'; {near[0]}.py?' if near else ''})")
    if not stray:
        return None
    return f"--seeds {spec}: not used, no region searched takes them: {'; '.join(stray)}"


def _from_folder(folder: Path, name: str) -> tuple[str | None, str]:
    for file in (folder / f"{name}.py", folder / f"{name}_seed.py"):
        if file.is_file():
            return file.read_text(encoding="utf-8"), f"--seeds {file}"
    return None, f"--seeds {folder} holds no {name}.py"


def _from_function(func, spec: str, path: Path) -> tuple[str | None, str]:
    try:
        code = func(path)
    except Exception as exc:
        said = f"--seeds {spec} raised {type(exc).__name__}{raised_at(exc)} on {path.name}: {exc}"
        return None, one_line(said, 300)
    if code is not None and not isinstance(code, str):
        return None, f"--seeds {spec} returned a {type(code).__name__} for {path.name}, not a source or None"
    return code, f"--seeds {spec}" if code is not None else f"--seeds {spec} has none for {path.name}"


def _stored(run_dir: Path) -> tuple[str | None, int]:
    """(the code of the run's stored start, iterations after it)."""
    if not holds_run(run_dir):
        return None, 0
    store = RunStore.open_readonly(run_dir)
    try:
        start = store.at_iteration(0)
        return (start.code if start else None), len(store.iterations() - {0})
    finally:
        store.close()


def find_start(
    task: Task,
    task_path: Path,
    run_dir: Path,
    seeds_dir: Path,
    given: Seeder | None,
    llm: bool,
    backend: Callable[[], EvalBackend] | None,
) -> Start | str:
    """The region's start, or why it has none (one line). `backend`: the evaluation pool (opened on
    demand), given on CUDA only: torch.compile's seed is derived there."""
    name = task_path.stem
    stored_code, after = _stored(run_dir)
    code, origin = given(name, task_path) if given is not None else (None, "")
    kept, why_file = seeds_dir / f"{name}.py", seeds_dir / f"{name}.txt"
    # A search keeps its stored start, unless a new seed is given before any iteration went on from it.
    if stored_code is not None and (after or code is None):
        note = None
        if code is not None and program_hash(code) != program_hash(stored_code):
            note = f"{origin} differs from the start its search has gone on from; remove {run_dir} to start over"
        return Start(None, _said(why_file) or "its stored start", note)
    if code is None and kept.is_file():
        code, origin = kept.read_text(encoding="utf-8"), _said(why_file) or f"{kept}"
    elif code is None and (ours := fused_seed(task_path)) is not None:
        code, origin = ours, OUR_FUSED_SEED
    elif code is None and not why_file.is_file() and backend is not None:
        derived, what = derive(task_path)
        if derived is not None:
            code, what = llm_judged(task, derived, what, _mutator(llm), backend())
        origin = what.removeprefix("starting from ")
        if code is None:
            _keep(seeds_dir, name, None, origin)  # not derived again on the next run
    if code is None:
        if llm:
            return Start(None, "the LLM's first version")
        said = _said(why_file)
        if said:
            return said
        return NO_SEED.format(why=f" ({origin})" if origin else "")
    _keep(seeds_dir, name, code, origin)
    return Start(code, origin)


def _mutator(llm: bool) -> str:
    return "llm" if llm else "tune"


def _said(path: Path) -> str | None:
    return path.read_text(encoding="utf-8").strip() if path.is_file() else None


def _keep(seeds_dir: Path, name: str, code: str | None, origin: str) -> None:
    seeds_dir.mkdir(parents=True, exist_ok=True)
    if code is not None:
        (seeds_dir / f"{name}.py").write_text(code, encoding="utf-8")
    (seeds_dir / f"{name}.txt").write_text(origin + "\n", encoding="utf-8")
