"""The process Nsight Compute profiles: a candidate that already has its verdict, run for one
forward call between cudaProfilerStart and cudaProfilerStop (ncu runs with
--profile-from-start off, so the warm-up calls, which build the Triton kernels, are not profiled).

Contained like a sandbox as far as ncu allows: /proc masks and Landlock (writes only beneath its
scratch directory and the GPU's device files) before torch is imported; capabilities dropped and
seccomp (no new sockets, no ptrace, signals only to itself) once CUDA is up and ncu's injection
has connected. Landlock leaves TCP open: ncu's injection library talks to the ncu front end over
loopback TCP; the network is closed instead by the network namespace the stage starts ncu in
(where it may create one: root). The layers applied and their outcomes go to contained.json.

    python -m kernelsmith.evaluate.profiling.ncu_target DIR   (DIR: task.py, candidate.py, spec.json)
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def _contain_early(layers: list[str], workdir: str) -> dict[str, str]:
    from kernelsmith.evaluate.sandboxing import containment, landlock, procmask

    out: dict[str, str] = {}
    if "procmask" in layers:
        try:
            out["procmask"] = f"on: {procmask.mask_other_processes(workdir)} /proc entries covered"
        except OSError as exc:
            out["procmask"] = f"failed: {exc}"
    if "landlock" in layers:
        try:
            dirs, files = containment.writable_paths(workdir, "cuda")
            applied = landlock.restrict(dirs, files, tcp=False)  # ncu's injection needs loopback TCP
            out["landlock"] = f"on: ABI {applied.abi}, TCP left to the network namespace"
        except OSError as exc:
            out["landlock"] = f"failed: {exc}"
    return out


def main() -> None:
    workdir = Path(sys.argv[1])
    spec = json.loads((workdir / "spec.json").read_text())
    layers: list[str] = spec.get("layers", [])
    contained = _contain_early(layers, str(workdir))

    import torch

    from kernelsmith.evaluate.runtime import build_model, make_inputs, set_precision
    from kernelsmith.evaluate.sandboxing import containment
    from kernelsmith.task import load_module

    set_precision()  # as in the sandbox whose verdict it profiles
    task = load_module((workdir / "task.py").read_text(), workdir / "task.py", "ks_profiled_task")
    cand = load_module((workdir / "candidate.py").read_text(), workdir / "candidate.py", "ks_profiled_candidate")
    seed = int(spec.get("seed", 0))
    model = build_model(cand.ModelNew, task, seed, "cuda")
    inputs = make_inputs(task, seed, "cuda")
    with torch.no_grad():
        for _ in range(int(spec.get("warmup", 2))):
            model(*inputs)
        torch.cuda.synchronize()
        late = [name for name in layers if name in ("procmask", "seccomp")]
        contained.update(containment.apply_late(late, None, str(workdir)))
        (workdir / "contained.json").write_text(json.dumps(contained))
        torch.cuda.profiler.start()  # cudaProfilerStart: ncu profiles from here
        model(*inputs)
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown (CUDA, Triton) under the profiler


if __name__ == "__main__":
    main()
