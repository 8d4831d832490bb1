"""The candidate process: the only place candidate code runs.

Started warm (torch and triton imported) by a judge, it takes one job: load the task and the
candidate, build ModelNew, then run what the judge asks (correctness trials on seeds it sends,
one timing run) and send outputs back as data. It never decides anything: the judge compares.
One job per process, so whatever the candidate patched or left behind dies with it.

    python -m kernelsmith.evaluate.sandbox --fd N --device cpu|cuda
"""

from __future__ import annotations

import argparse
import os
import sys
from multiprocessing.connection import Connection
from pathlib import Path

import torch
import triton  # noqa: F401  (warm import; the interpreter flag is read from the environment)

from kernelsmith.evaluate import timing
from kernelsmith.evaluate.checks import flatten_outputs
from kernelsmith.evaluate.options import EvalOptions
from kernelsmith.evaluate.protocol import Channel, encode_tensor
from kernelsmith.evaluate.runtime import build_model, excerpt, make_inputs, synchronize
from kernelsmith.task import load_module


class LaunchCounter:
    """Counts Triton kernel launches (compiled and interpreted) while candidate code runs."""

    def __init__(self):
        self.count = 0
        from triton.runtime.jit import JITFunction

        classes = [JITFunction]
        try:
            from triton.runtime.interpreter import InterpretedFunction

            classes.append(InterpretedFunction)
        except ImportError:
            pass
        for cls in classes:
            original = cls.run

            def run(fn_self, *args, __original=original, **kwargs):
                self.count += 1
                return __original(fn_self, *args, **kwargs)

            cls.run = run


def classify(exc: BaseException) -> str:
    module = type(exc).__module__ or ""
    if module.startswith("triton.compiler") or type(exc).__name__ in ("CompilationError", "CompileTimeAssertionFailure"):
        return "compile_error"
    return "runtime_error"


def encode_leaves(leaves: list) -> list:
    out = []
    for leaf in leaves:
        if isinstance(leaf, torch.Tensor):
            if type(leaf) is not torch.Tensor:
                raise TypeError(f"forward returned a {type(leaf).__name__}, not a plain torch.Tensor")
            if leaf.layout != torch.strided:
                raise TypeError(f"forward returned a tensor with layout {leaf.layout}, not a dense tensor")
            out.append(encode_tensor(leaf))
        elif leaf is None or isinstance(leaf, (bool, int, float)):
            out.append({"kind": "value", "value": leaf})
        else:
            raise TypeError(f"forward returned a {type(leaf).__name__}; expected tensors")
    return out


class Sandbox:
    def __init__(self, chan: Channel, device: str):
        self.chan = chan
        self.device = device
        self.launches = LaunchCounter()
        self.workdir: Path | None = None

    def fail(self, stage: str, exc: BaseException, kind: str | None = None) -> None:
        replace = {str(self.workdir) + os.sep: ""} if self.workdir else {}
        self.chan.send({"op": "error", "stage": stage, "kind": kind or classify(exc), "error": excerpt(exc, replace=replace)})

    def run(self) -> None:
        if self.device == "cuda":
            torch.cuda.init()  # while warming up, not on the evaluation's clock
        self.chan.send({"op": "ready", "pid": os.getpid()})
        job = self.chan.recv()
        self.workdir = Path(job["workdir"])
        os.chdir(self.workdir)
        sys.path.insert(0, str(self.workdir))
        try:
            self.task = load_module(job["task_source"], self.workdir / "task_reference.py", "task_reference")
        except BaseException as exc:  # the judge loaded it fine, so this is the candidate's doing
            return self.fail("load", exc, "runtime_error")
        try:
            module = load_module(job["candidate_source"], self.workdir / "candidate.py", "candidate")
            model_cls = getattr(module, "ModelNew")
        except BaseException as exc:
            return self.fail("load", exc, "compile_error")
        try:
            self.model = build_model(model_cls, self.task, job["seed_init"], self.device)
            synchronize(self.device)
        except BaseException as exc:
            return self.fail("load", exc, "compile_error")
        self.chan.send({"op": "loaded"})
        while True:
            msg = self.chan.recv()
            if msg["op"] == "trial":
                if not self.trial(msg["seed"]):
                    return
            elif msg["op"] == "time":
                if not self.time(msg["seed"], EvalOptions(**msg["options"])):
                    return
            else:
                return

    def forward(self, inputs: list):
        with torch.no_grad():
            return self.model(*inputs)

    def send_outputs(self, op: str, out, inputs: list, **extra) -> bool:
        try:
            leaves = flatten_outputs(out)
            msg = {"op": op, "outputs": encode_leaves(leaves), "inputs": encode_leaves(inputs), **extra}
        except BaseException as exc:
            self.fail(op, exc, "runtime_error")
            return False
        self.chan.send(msg)
        ack = self.chan.recv()  # keep `out` alive until the judge has read it (CUDA IPC)
        return ack.get("op") == "ack"

    def trial(self, seed: int) -> bool:
        try:
            inputs = make_inputs(self.task, seed, self.device)
            before = self.launches.count
            out = self.forward(inputs)
            synchronize(self.device)
            launched = self.launches.count - before
        except BaseException as exc:
            self.fail("trial", exc)
            return False
        return self.send_outputs("outputs", out, inputs, launches=launched)

    def time(self, seed: int, opts: EvalOptions) -> bool:
        last = {}
        try:
            inputs = make_inputs(self.task, seed, self.device)

            def call():
                last["out"] = self.forward(inputs)

            stats = timing.benchmark(call, opts)
            synchronize(self.device)
        except BaseException as exc:
            self.fail("timing", exc)
            return False
        return self.send_outputs("timed", last["out"], [], stats=stats.model_dump())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fd", type=int, required=True)
    ap.add_argument("--device", choices=["cpu", "cuda"], required=True)
    args = ap.parse_args()
    chan = Channel(Connection(args.fd))
    try:
        Sandbox(chan, args.device).run()
    except (EOFError, ConnectionError):
        pass
    # Skip interpreter teardown: candidate threads or atexit hooks must not delay the exit.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
