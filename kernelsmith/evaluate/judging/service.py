"""A judge process's request loop: evaluate, hardware, profile, until its pool goes away.

Started by kernelsmith.evaluate.judging.worker. Kept apart from the judge (warm state) and the evaluation
(one candidate's stages), which this is the one place to join.
"""

from __future__ import annotations

from pathlib import Path

from kernelsmith.evaluate.judging.evaluation import Evaluation
from kernelsmith.evaluate.judging.judge import Judge, TaskLoadError
from kernelsmith.evaluate.options import EvalOptions
from kernelsmith.evaluate.protocol import Channel
from kernelsmith.evaluate.runtime import excerpt
from kernelsmith.evaluate.sandboxing.containment import ContainmentError
from kernelsmith.evaluate.sandboxing.sandbox_handle import SandboxHandle
from kernelsmith.evaluate.sandboxing.template_handle import Template


def evaluate(judge: Judge, req: dict) -> dict:
    """One "evaluate" request's reply: the verdict, or why there is none (the task's fault, the
    containment's, or a bug of ours with its traceback)."""
    try:
        result = Evaluation(
            judge, req["task_hash"], req["candidate_hash"], EvalOptions(**req["options"]), req.get("build")
        ).run(req["task_source"], req["candidate_source"], req.get("after"))
        return {"op": "result", "result": result.model_dump(mode="json")}
    except TaskLoadError as exc:
        return {"op": "task_error", "error": str(exc)}
    except ContainmentError as exc:
        return {"op": "setup_error", "error": str(exc)}
    except Exception as exc:  # a bug of ours: report it with its traceback
        return {"op": "internal_error", "error": excerpt(exc, limit=6000)}


def serve(chan: Channel, device: str, tmp: Path, spares: list[SandboxHandle], template: Template | None = None) -> None:
    judge = Judge(device, tmp, spares, template)
    chan.send({"op": "ready", "gpu_name": judge.gpu_name, "torch_version": judge.torch_version})
    try:
        while True:
            try:
                req = chan.recv()
            except (EOFError, ConnectionError):
                return
            op = req.get("op")
            if op == "hardware":
                chan.send({"op": "hardware", "hardware": judge.hardware()})
            elif op == "profile":
                chan.send({"op": "profile", "profile": judge.profile(req).model_dump(mode="json")})
            elif op == "evaluate":
                chan.send(evaluate(judge, req))
            else:
                return
    finally:
        judge.close()
