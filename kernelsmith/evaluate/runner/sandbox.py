"""The candidate process: the only place candidate code runs.

Started warm (torch and triton imported) by a judge, it takes one job: load the task and the
candidate, build ModelNew, then run what the judge asks (correctness trials on seeds it sends,
one timing run) and send outputs back as data. It never decides anything: the judge compares.
One job per process, so whatever the candidate patched or left behind dies with it.

Started through kernelsmith.evaluate.runner.sandbox_start, which applies the containment layers that
must come before torch is imported; the others are applied here once CUDA is up, before any
candidate code exists.
"""

from __future__ import annotations

import os
import sys
from multiprocessing.connection import Connection
from pathlib import Path

import torch
import triton  # noqa: F401  (warm import; the interpreter flag is read from the environment)

from kernelsmith.evaluate.build import hook as build_hook
from kernelsmith.evaluate.build.errors import BuildError
from kernelsmith.evaluate.checks import flatten_outputs, output_structure, plain_structure
from kernelsmith.evaluate.checksums import checksum_weights, weighted_checksums
from kernelsmith.evaluate.measuring import capture, timing
from kernelsmith.evaluate.measuring.activity import ActivityRecorder
from kernelsmith.evaluate.options import EvalOptions
from kernelsmith.evaluate.protocol import Channel, encode_tensor, tensor_facts
from kernelsmith.evaluate.runner.trial import HOLD_MS, TrialMixin
from kernelsmith.evaluate.runner.watch import LaunchCounter
from kernelsmith.evaluate.runtime import build_model, excerpt, make_inputs, refill_inputs, set_precision, synchronize
from kernelsmith.evaluate.sandboxing import containment
from kernelsmith.task import load_module

# Bound before any candidate code is imported: patching these names later changes nothing here.
_clone = torch.Tensor.clone
_copy = torch.Tensor.copy_
_OutOfMemoryError = torch.OutOfMemoryError

PROFILE_CALLS = 3  # forward calls recorded for the kernel breakdown, after the timed ones


def classify(exc: BaseException) -> str:
    module = type(exc).__module__ or ""
    if (
        isinstance(exc, BuildError)
        or module.startswith("triton.compiler")
        or type(exc).__name__
        in (
            "CompilationError",
            "CompileTimeAssertionFailure",
        )
    ):
        return "compile_error"
    return "runtime_error"


def encode_leaves(leaves: list) -> list:
    out = []
    for leaf in leaves:
        if isinstance(leaf, torch.Tensor):
            if type(leaf) is not torch.Tensor:
                raise TypeError(f"forward returned a {type(leaf).__name__}, not a plain torch.Tensor")
            out.append(encode_tensor(leaf))  # another layout or device goes as its facts: the judge says which
        elif leaf is None or isinstance(leaf, (bool, int, float)):
            out.append({"kind": "value", "value": leaf})
        else:
            raise TypeError(f"forward returned a {type(leaf).__name__}; expected tensors")
    return out


def leaf_facts(leaves: list) -> list:
    """Where and how each output tensor lived, without its data (a judge-timed batch's outputs travel
    as checksums); other leaves as None."""
    return [
        {"kind": "facts", **tensor_facts(x)} if isinstance(x, torch.Tensor) else {"kind": "value", "value": None}
        for x in leaves
    ]


class Sandbox(TrialMixin):
    def __init__(
        self,
        chan: Channel,
        device: str,
        layers: list[str] | None = None,
        uid: int | None = None,
        contained: dict[str, str] | None = None,
    ):
        self.chan = chan
        self.device = device
        self.layers = layers or []
        self.uid = uid
        self.contained = dict(contained or {})  # layer -> outcome, reported in the ready message
        set_precision()  # the judge's reference runs at it too (runtime.PRECISION), before any candidate code
        build_hook.install()  # before the launch counter, which wraps what it installs
        self.launches = LaunchCounter()
        self.workdir: Path | None = None
        self.spin_cycles_per_ms = 0.0
        self.hold_ms = HOLD_MS[0]
        self.out_sizes: list[int] = []  # the last trial's output storages, in bytes (the CPU's poisoning)

    def fail(self, stage: str, exc: BaseException, kind: str | None = None, what: str = "") -> None:
        """Report the candidate's failure: its frames first, the scratch path left out, `what`
        it was doing when that is not plain from the traceback."""
        own = str(self.workdir) + os.sep if self.workdir else None
        text = excerpt(exc, replace={own: ""} if own else {}, own_dir=own)
        self.chan.send(
            {
                "op": "error",
                "stage": stage,
                "kind": kind or classify(exc),
                "error": f"{what}:\n{text}" if what else text,
                "builds": build_hook.records(),
            }
        )

    def warm_up(self) -> dict:
        """Before any candidate code: start CUDA and the profiler (its first use costs seconds),
        check that device activity is visible here, and measure the spin kernel's clock."""
        if self.device == "cuda":
            torch.cuda.init()  # while warming up, not on the evaluation's clock
        with ActivityRecorder(self.device) as rec:
            torch.ones(2, device=self.device).add_(1)
            synchronize(self.device)
        info: dict = {"device_activity": bool(rec.activity.kernels)}
        if self.device == "cuda":
            self.spin_cycles_per_ms = timing.spin_cycles_per_ms()
            info["spin_cycles_per_ms"] = self.spin_cycles_per_ms
        return info

    def run(self) -> None:
        # Imports done (host work only); the GPU warm-up waits for the judge's word, which it gives
        # when no timed call runs (kernelsmith.evaluate.sandboxing.sandbox_handle).
        self.chan.send({"op": "imported", "pid": os.getpid()})
        if self.chan.recv().get("op") != "warm":
            return
        info = self.warm_up()
        self.contained.update(containment.apply_late(self.layers, self.uid, os.getcwd()))
        self.chan.send({"op": "ready", "pid": os.getpid(), "containment": self.contained, **info})
        job = self.chan.recv()
        if job.get("op") == "probe":  # kernelsmith doctor: try each escape from inside the containment
            from kernelsmith.evaluate.runner.escape_probe import probe

            self.chan.send({"op": "probe", "results": probe(job)})
            return
        if job.get("op") == "build":  # a builder: compile one extension, run nothing it built
            from kernelsmith.evaluate.build.builder import build

            self.chan.send({"op": "built", **build(job["spec"], Path(job["workdir"]), build_hook.original())})
            return
        self.workdir = Path(job["workdir"])
        build_hook.configure(job.get("build"), self.chan, self.workdir)
        os.chdir(self.workdir)
        sys.path.insert(0, str(self.workdir))
        try:
            self.task = load_module(job["task_source"], self.workdir / "task_reference.py", "task_reference")
        except BaseException as exc:  # the judge loaded it fine, so this is the candidate's doing
            return self.fail("load", exc, "runtime_error")
        try:
            module = load_module(job["candidate_source"], self.workdir / "candidate.py", "candidate")
            model_cls = module.ModelNew
        except BaseException as exc:
            return self.fail("load", exc, "compile_error")
        try:
            self.model = build_model(model_cls, self.task, job["seed_init"], self.device)
            synchronize(self.device)
        except BaseException as exc:  # the candidate's code ran (its __init__): not a compile error
            kind = "compile_error" if isinstance(exc, BuildError) else "runtime_error"  # unless a build failed
            return self.fail("load", exc, kind, "building the model failed: ModelNew(*get_init_inputs()) raised")
        if job.get("warm_seed") is not None:  # loaded ahead of its turn (judging/ahead.py)
            self.first_forward(int(job["warm_seed"]))
        self.chan.send({"op": "loaded", "builds": build_hook.records()})
        while True:
            msg = self.chan.recv()
            if msg["op"] == "trial":
                if not self.trial(msg["seed"], msg.get("sizes")):
                    return
            elif msg["op"] == "time":
                if not self.time(msg["seed"], EvalOptions(**msg["options"]), bool(msg.get("graph"))):
                    return
            elif msg["op"] == "batch" and msg.get("graph"):
                if not self.graph_batch(int(msg["calls"]), int(msg["sets"])):
                    return
            elif msg["op"] == "batch":
                if not self.batch(int(msg["calls"])):
                    return
            else:
                return

    def first_forward(self, seed: int) -> None:
        """One forward on inputs of its own, nothing sent: its kernels compile now, beside another candidate's
        trials. What it does is judged in its turn, whose trials run it again; an error here is left to them.
        Its memory goes back to the allocator, where the first trial's poisoning fills it."""
        try:
            out = self.forward(make_inputs(self.task, seed, self.device))
            synchronize(self.device)
            del out
        except BaseException:  # noqa: BLE001  # the candidate's; its turn reports it
            pass

    def forward(self, inputs: list):
        with torch.no_grad():
            return self.model(*inputs)

    def send_outputs(self, op: str, leaves: list, inputs: list, **extra) -> bool:
        try:
            msg = {"op": op, "outputs": encode_leaves(leaves), "inputs": encode_leaves(inputs), **extra}
        except BaseException as exc:
            self.fail(op, exc, "runtime_error")
            return False
        self.chan.send(msg)
        ack = self.chan.recv()  # keep the tensors alive until the judge has read them (CUDA IPC)
        return ack.get("op") == "ack"

    @staticmethod
    def snapshot(out) -> tuple[object, list]:
        """The outputs' structure, and copies of them taken right after forward and a device sync:
        whatever a thread, timer or stream writes into them later cannot reach the judge. An
        output that cannot cross (a dict, an object) sends its structure alone: the judge says
        what is wrong with it."""
        structure = output_structure(out)
        if not plain_structure(structure):
            return structure, []
        leaves = flatten_outputs(out)
        return structure, [_clone(x) if type(x) is torch.Tensor else x for x in leaves]

    def time(self, seed: int, opts: EvalOptions, graph: bool) -> bool:
        """Both figures of forward (kernelsmith.evaluate.measuring.timing: device time in a CUDA graph, or per
        call when it cannot be captured; eager call time), every timed call on inputs refilled from a
        fresh seed the harness derives from `seed`; the last timed call's output goes to the judge."""
        try:
            if self.device == "cuda":  # the trials' outputs and inputs the judge has let go (CUDA IPC)
                torch.cuda.ipc_collect()
            work = timing.Workload(self.forward, lambda s: make_inputs(self.task, s, self.device), copy=_copy)
            m = self._measure(work, opts, seed, graph)
            structure, leaves = m.last_output  # type: ignore[misc]  # snapshot's (structure, copies)
            profile = None if m.activity is not None else self.profile_calls(work.make(seed))
            del work
            if self.device == "cuda":  # the graph's pool and the input sets, back to the device: the
                capture.release_memory()  # judge runs the reference next, beside this process
        except BaseException as exc:
            self.fail("timing", exc)
            return False
        return self.send_outputs(
            "timed",
            leaves,
            [],
            structure=structure,
            stats=m.device.model_dump(),
            eager=m.eager.model_dump(),
            fallback="; ".join(why for why in (m.fallback, m.note) if why) or None,
            sets=m.sets,
            activity=m.window.to_message(),
            replay=m.activity.to_message() if m.activity is not None else None,
            profile=profile,
        )

    def _measure(self, work: timing.Workload, opts: EvalOptions, seed: int, graph: bool) -> timing.Measurement:
        """timing.measure; where the graph's calls and input sets do not fit the device beside the judge
        (a multi-GB task), once more call by call on one set, said in the fallback. A candidate that
        runs out of memory call by call too fails as before."""
        why = None
        try:
            return timing.measure(work, opts, seed, graph=graph, keep=self.snapshot)
        except _OutOfMemoryError as exc:
            if self.device != "cuda" or not graph:
                raise
            why = str(exc).split(". ")[0][:120]
        capture.release_memory()  # outside the handler: its traceback no longer holds the failed sets
        m = timing.measure(work, opts, seed, graph=False, keep=self.snapshot)
        m.fallback = f"out of device memory timing in a CUDA graph ({why}): timed call by call"
        return m

    def profile_calls(self, inputs: list) -> dict | None:
        """Where forward's device time goes (CUDA): a few untimed calls, nothing else on the device
        in their window (no refills, no checks, no judge running the reference beside them, as
        during the trials), recorded by the CUDA profiler. Informational: no verdict reads it."""
        if self.device != "cuda":
            return None
        with ActivityRecorder(self.device) as rec:
            for _ in range(PROFILE_CALLS):
                self.forward(inputs)
            synchronize(self.device)
        return {**rec.activity.to_message(), "windows": PROFILE_CALLS}

    def batch(self, calls: int) -> bool:
        """Calls timed by the judge's clock. Armed first (inputs made, activity recorder started:
        outside the clock), then on "go" each call runs on inputs refilled from seed + 1 + k and
        takes a weighted checksum of its whole output, so no call can skip its work. The reply that
        stops the judge's clock carries the checksums, so they exist before it is sent; the
        activity record follows it."""
        try:
            inputs = make_inputs(self.task, 0, self.device)
            synchronize(self.device)
            rec = ActivityRecorder(self.device).__enter__()
        except BaseException as exc:
            self.fail("timing", exc)
            return False
        self.chan.send({"op": "armed"})
        go = self.chan.recv()
        try:
            seed, weight_seed = int(go["seed"]), int(go["weight_seed"])
            weights = None
            sums = []
            before = self.launches.count
            leaves: list = []
            for k in range(calls):
                refill_inputs(self.task, inputs, seed + 1 + k, self.device, copy=_copy)
                leaves = flatten_outputs(self.forward(inputs))
                if weights is None:
                    weights = checksum_weights(leaves, weight_seed)
                sums.append(weighted_checksums(leaves, weights))
            synchronize(self.device)
            values = [[float(x) for x in call] for call in sums]
            launched = self.launches.count - before
        except BaseException as exc:
            self.fail("timing", exc)
            return False
        self.chan.send({"op": "batch_done", "checksums": values, "launches": launched})
        rec.__exit__(None, None, None)
        try:
            shown = leaf_facts(leaves)  # outside the judge's clock: where the last call's outputs lived
        except BaseException as exc:  # a tensor subclass's own `device`, say
            self.fail("timing", exc)
            return False
        del inputs, leaves, sums, weights
        capture.release_memory()  # as after a graph batch: the judge checks calls next
        self.chan.send({"op": "batch_activity", "activity": rec.activity.to_message(), "outputs": shown})
        return True

    def graph_batch(self, calls: int, sets: int) -> bool:
        """Calls timed by the judge's clock as CUDA-graph replays (kernelsmith.evaluate.measuring.graph_batch):
        captured and armed first; each "go" refills the sets, replays once and replies with every
        call's checksum; "record" replays once more under the profiler for the operator rule."""
        from kernelsmith.evaluate.measuring.graph_batch import GraphBatch

        try:
            work = timing.Workload(self.forward, lambda s: make_inputs(self.task, s, self.device), copy=_copy)
            batch = GraphBatch(work, calls, sets, self.device)
            shown = leaf_facts(batch.template)
        except Exception as exc:  # noqa: BLE001 - the judge times calls one by one instead, and says so
            capture.reset_after_failed()
            self.chan.send({"op": "unarmed", "why": f"{type(exc).__name__}: {str(exc)[:300]}"})
            return True
        self.chan.send({"op": "armed", "outputs": shown})
        while True:
            msg = self.chan.recv()
            try:
                if msg.get("op") == "go":
                    sums = batch.go(int(msg["seed"]), int(msg["weight_seed"]))
                    self.chan.send({"op": "batch_done", "checksums": sums, "launches": 0})
                    continue
                if msg.get("op") != "record":
                    return False
                act = batch.record(self.device)
            except BaseException as exc:
                self.fail("timing", exc)
                return False
            # The batch's sets and graph pool back to the GPU before the judge checks calls against its
            # reference: on a multi-GB task the judge's checksum weights need them (KernelBench's
            # 36_RMSNorm_ on an H100: 6.4 of 79.2 GiB free, the judge out of memory, 2026-12-07).
            del batch
            capture.release_memory()
            self.chan.send({"op": "batch_activity", "activity": act.to_message()})
            return True


def main(fd: int, device: str, layers: list[str], uid: int | None, contained: dict[str, str]) -> None:
    chan = Channel(Connection(fd))
    try:
        Sandbox(chan, device, layers, uid, contained).run()
    except (EOFError, ConnectionError):
        pass
    # Skip interpreter teardown: candidate threads or atexit hooks must not delay the exit.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
