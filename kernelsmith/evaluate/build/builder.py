"""The builder: runs in a contained sandbox process (kernelsmith.evaluate.runner.sandbox, job "build"),
builds one extension with torch's own `load_inline`, and never loads what it built, so no
candidate code runs here: only the compiler, on the candidate's sources. The pool reads the
library once this process is dead.
"""

from __future__ import annotations

import time
from pathlib import Path

from kernelsmith.evaluate.build.errors import first_error_lines
from kernelsmith.evaluate.build.spec import load_inline_kwargs


def build(spec: dict, workdir: Path, load_inline) -> dict:
    import torch.utils.cpp_extension as cpp

    if not hasattr(cpp, "_import_module_from_library"):
        return {"ok": False, "unsupported": True, "error": "this torch's load_inline cannot build without loading"}
    # Build only: torch's last step would import (run) the library in this process.
    cpp._import_module_from_library = lambda *args, **kwargs: None  # type: ignore[attr-defined]
    out = workdir / "build"
    out.mkdir()
    kwargs = load_inline_kwargs(spec)
    t0 = time.monotonic()
    try:
        load_inline(**kwargs, build_directory=str(out), verbose=False)
    except Exception as exc:  # the compiler's verdict on the sources
        text = first_error_lines(str(exc), {str(out) + "/": "", str(workdir) + "/": ""})
        return {"ok": False, "error": text, "seconds": time.monotonic() - t0}
    library = out / f"{spec['name']}.so"
    if not library.exists():
        return {"ok": False, "unsupported": True, "error": f"the build left no {library.name}"}
    return {
        "ok": True,
        "file": str(library.relative_to(workdir)),
        "module": spec["name"],
        "seconds": time.monotonic() - t0,
    }
