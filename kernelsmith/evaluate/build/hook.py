"""The sandbox's `load_inline`: installed before any candidate code, it finds the call's build
among those the judge staged in the scratch directory (built ahead by the pool, keyed by
content) and loads it, or raises the compiler's error cached with it. A call the pool could not
build ahead (arguments computed at run time) is built here, as torch would, between "building"
and "built" messages: the judge gives a build its own time limit and starts the candidate's
clock again after it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import time
from pathlib import Path

from kernelsmith.evaluate.build.errors import BuildError, first_error_lines
from kernelsmith.evaluate.build.spec import bind_call, build_key, canonical

_state: dict = {"original": None, "load": None, "config": None, "chan": None, "records": []}


def original():
    """torch's own load_inline, as it was before any patch."""
    return _state["original"]


def install() -> None:
    import torch.utils.cpp_extension as cpp

    if _state["original"] is not None:
        return
    _state["original"], _state["load"] = cpp.load_inline, cpp.load

    def load_inline(*args, **kwargs):
        return _load_inline(args, kwargs)

    def load(*args, **kwargs):  # file sources: never built ahead, but a build all the same
        return _build_here(str(kwargs.get("name", args[0] if args else "?")), None, _state["load"], args, kwargs)

    cpp.load_inline = load_inline
    cpp.load = load


def configure(build: dict | None, chan, workdir: Path) -> None:
    """The job's build settings: {"env": ..., "dir": staged entries, "arch": ...} (or None)."""
    _state["config"], _state["chan"], _state["records"] = build or {}, chan, []
    _state["workdir"] = str(workdir)
    env = (build or {}).get("env") or {}
    if env.get("arch"):
        os.environ["TORCH_CUDA_ARCH_LIST"] = env["arch"]  # what the pool builds for, so keys agree


def records() -> list[dict]:
    return list(_state["records"])


def _load_inline(args: tuple, kwargs: dict):
    config = _state["config"] or {}
    named = bind_call(args, kwargs)
    spec = canonical(named) if named is not None else None
    name = str((named or {}).get("name") or (args[0] if args else "?"))
    if spec is not None and config.get("env") and config.get("dir"):
        key = build_key(spec, config["env"])
        staged = Path(config["dir"]) / key
        entry_file = staged / "entry.json"
        if entry_file.exists():
            t0 = time.monotonic()
            entry = json.loads(entry_file.read_text())
            record = {"name": name, "key": key, "source": config.get("sources", {}).get(key, "cache")}
            if not entry.get("ok"):
                _state["records"].append({**record, "ok": False, "seconds": time.monotonic() - t0})
                raise BuildError(f"building extension '{name}' failed:\n{entry.get('error', '')}")
            module = _import(entry["module"], staged / entry["file"])
            _state["records"].append({**record, "ok": True, "seconds": time.monotonic() - t0})
            return module
    return _build_here(name, spec, _state["original"], args, kwargs)


def _import(module_name: str, path: Path):
    """What torch's load_inline does last (_import_module_from_library, is_python_module=True)."""
    spec = importlib.util.spec_from_file_location(module_name, str(path))
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load the built extension {module_name}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _build_here(name: str, spec: dict | None, build, args: tuple, kwargs: dict):
    """A build in the sandbox: announced to the judge, its output captured (verbose off), its
    failure told by the compiler's first error lines."""
    chan = _state["chan"]
    kwargs = {**kwargs, "verbose": False}
    if chan is not None:
        chan.send({"op": "building", "name": name})
    t0 = time.monotonic()
    ok = False
    try:
        module = build(*args, **kwargs)
        ok = True
        return module
    except Exception as exc:
        workdir = _state.get("workdir") or ""
        text = first_error_lines(str(exc), {workdir + "/": ""} if workdir else None)
        raise BuildError(f"building extension '{name}' failed:\n{text}") from None
    finally:
        seconds = time.monotonic() - t0
        _state["records"].append({"name": name, "key": None, "source": "sandbox", "ok": ok, "seconds": seconds})
        if chan is not None:
            chan.send({"op": "built", "name": name, "seconds": seconds})
