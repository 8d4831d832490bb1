"""A short search end to end with CUDA timing, with a scripted LLM (no LLM is reachable on the GPU
machine): the ScriptedServer starts in this process, `kernelsmith evolve` runs as a user runs it.

The task is ReLU at KernelBench level-1 size; the seed is the bundled kernel cut to 128-element
blocks and one warp. The scripted model answers each prompt with the parent's kernel at another
block size and warp count (drawn from the prompt's hash, so the replies follow the search), once
with code that does not compile and once with no code, so feedback paths run too.

    python benchmarks/evolve_gpu.py --out DIR [--iterations 8] [--device cuda]

Writes DIR/evolve_gpu/{summary.json,export.jsonl,stdout.txt} and prints the summary.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
import zlib
from pathlib import Path

from kernelsmith.llm import ScriptedServer

HERE = Path(__file__).resolve().parent
TASK = HERE / "tasks" / "relu.py"
SEED_SOURCE = (HERE / "tasks" / "relu_triton.py").read_text()


def variant(code: str, block: int, warps: int) -> str:
    code = re.sub(r"BLOCK_SIZE = \d+", f"BLOCK_SIZE = {block}", code)
    return re.sub(r"num_warps=\d+", f"num_warps={warps}", code)


def parent_code(user: str) -> str:
    """The current program's code, as the prompt shows it."""
    at = user.find("# Current program")
    start = user.find("```python\n", at) if at >= 0 else -1
    if start < 0:
        return SEED_SOURCE
    start += len("```python\n")
    return user[start : user.find("\n```", start)] + "\n"


def responder(request: dict) -> dict:
    user = request["messages"][-1]["content"]
    h = zlib.crc32(user.encode())
    n = h % 10
    if n == 0:
        return {"reply": "I would raise the block size."}  # no code: no_program
    if n == 1:
        return {"reply": "```python\nimport torch\ndef broken(:\n```"}  # compile error
    block, warps = 2 ** (8 + h % 6), 2 ** (h // 7 % 4)
    return {"reply": f"Block {block}, {warps} warps.\n```python\n{variant(parent_code(user), block, warps)}```\n"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--iterations", type=int, default=8)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--task", type=Path, default=TASK, help="a ReLU task (smaller ones for a CPU check)")
    args = ap.parse_args()
    out = args.out / "evolve_gpu"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    seed = out / "seed.py"
    seed.write_text(variant(SEED_SOURCE, 128, 1))
    run_dir = out / "run"
    with ScriptedServer(responder=responder) as server:
        cmd = [
            sys.executable,
            "-m",
            "kernelsmith.cli",
            "evolve",
            str(args.task),
            "--seed",
            str(seed),
            "--llm-base-url",
            server.url,
            "--model",
            "scripted",
            "--device",
            args.device,
            "--iterations",
            str(args.iterations),
            "--run-dir",
            str(run_dir),
        ]
        t0 = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE.parent)
        wall = time.monotonic() - t0
        requests = len(server.requests)
    (out / "stdout.txt").write_text(proc.stdout + "\n--- stderr\n" + proc.stderr)
    print(proc.stdout[-4000:], proc.stderr[-2000:], sep="\n")
    if proc.returncode != 0:
        raise SystemExit(f"evolve failed with exit code {proc.returncode}")
    export = subprocess.run(
        [sys.executable, "-m", "kernelsmith.cli", "export", str(run_dir)],
        capture_output=True,
        text=True,
        cwd=HERE.parent,
        check=True,
    ).stdout
    (out / "export.jsonl").write_text(export)
    summary = json.loads((run_dir / "summary.json").read_text())
    summary["wall_s"] = round(wall, 1)
    summary["llm_requests"] = requests
    summary["programs_table"] = [
        {
            k: r[k]
            for k in (
                "id",
                "iteration",
                "operator",
                "parent_id",
                "status",
                "speedup",
                "speedup_vs_compile",
                "candidate_ms",
            )
        }
        for r in map(json.loads, export.splitlines())
    ]
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
