"""The correctness stages of one evaluation, in the judge: every trial on fresh inputs checked against the
reference, and the rules over what each trial ran (the operator rule, work left unordered with the caller's
stream, threads left running).

A mixin of kernelsmith.evaluate.judging.evaluation.Evaluation, whose state it reads and writes (the judge,
the options, the flags and notes, the trials); kept apart so that each file holds one concern, as
evaluation_timing.py holds the timing stages.
"""

from __future__ import annotations

import copy
import time
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from kernelsmith.evaluate.checks import flatten_outputs, is_degenerate
from kernelsmith.evaluate.judging.evaluation_timing import _Verdict
from kernelsmith.evaluate.judging.judge import _seed
from kernelsmith.evaluate.measuring.activity import Activity, fmt_kernels, judge_operators, scaled
from kernelsmith.evaluate.result import StageSeconds, Status, TrialReport
from kernelsmith.evaluate.sandboxing.sandbox_handle import SandboxFailure
from kernelsmith.evaluate.verdict import Flag, TaskNote

if TYPE_CHECKING:
    from kernelsmith.evaluate.judging.judge import Judge
    from kernelsmith.evaluate.options import EvalOptions
    from kernelsmith.evaluate.sandboxing.sandbox_handle import SandboxHandle

# Most of an output off while the task's Model holds parameters: usually not the kernel but
# ModelNew's weights (runtime.build_model seeds both builds alike, as KernelBench does).
WEIGHTS_HINT = (
    "hint: most elements are off and the task's Model holds parameters: ModelNew's weights match Model's "
    "only when its __init__ creates the same parameters in the same order (both are built right after "
    "the same torch.manual_seed, as in KernelBench)"
)


class CorrectnessStages:
    """The correctness stages; see the module's docstring. Raises _Verdict to end an evaluation."""

    # The evaluation's state (kernelsmith.evaluate.judging.evaluation.Evaluation sets these).
    j: Judge
    opts: EvalOptions
    task: types.ModuleType
    ref_model: Any
    stages: StageSeconds
    base: dict[str, object]
    flags: dict[Flag, str]
    notes: dict[TaskNote, str]
    trials: list[TrialReport]
    launches: int
    activity: Activity
    ref_activity: Activity
    device_activity: bool
    degenerate: bool
    err_l2: list[float]
    own_names: set[str]
    _precise_model: Any = None  # a float64 copy of Model (False: none could be made)

    def _wait(self, sb: SandboxHandle, stage: str) -> dict:
        raise NotImplementedError

    def precise(self, seed: int) -> Callable[[], list | None]:
        """The precision rule's float64 run of the reference on the inputs of `seed`, asked for only
        when an output is beyond the flat tolerance; the float64 copy of Model is made once."""

        def run() -> list | None:
            if self._precise_model is None:
                try:
                    self._precise_model = copy.deepcopy(self.ref_model).to(torch.float64)
                except Exception:  # a Model that cannot be copied or converted: no precision rule
                    self._precise_model = False
            if self._precise_model is False:
                return None
            return self.j.precise_reference(self._precise_model, self.task, seed)

        return run

    def _correctness(self, sb: SandboxHandle) -> None:
        """Every trial on fresh inputs; the operator rule over what they ran."""
        t_base = time.monotonic()
        try:
            for i in range(self.opts.trials):
                self._trial(sb, i)
        finally:  # a trial that ended the evaluation counts up to its end
            self.stages.correctness = time.monotonic() - t_base
        if self.flags.get(Flag.no_custom_kernel):
            raise _Verdict(Status.rejected, self.flags[Flag.no_custom_kernel])

    def _trial(self, sb: SandboxHandle, i: int) -> None:
        j, opts = self.j, self.opts
        seed = _seed()
        sb.send({"op": "trial", "seed": seed})
        inputs, ref_out = j.run_reference(self.task, self.ref_model, seed)
        try:
            msg = self._wait(sb, f"correctness trial {i + 1}")
        except (SandboxFailure, _Verdict) as failure:  # it raised, crashed or timed out: no output
            why = failure.message if isinstance(failure, SandboxFailure) else failure.error
            self.trials.append(TrialReport(seed=seed, ok=False, answered=False, message=why))
            raise
        self.launches += int(msg.get("launches", 0))
        if i == 0:
            self.degenerate = is_degenerate(flatten_outputs(ref_out), opts.atol, opts.rtol)
            if self.degenerate:
                self.notes[TaskNote.degenerate_tolerance] = (
                    "an all-zero or constant output passes this task's elementwise tolerance; outputs were "
                    "also checked by relative L2 error"
                )
        threads = [str(t) for t in msg.get("threads", [])][:10]
        if threads:
            self.flags[Flag.background_thread] = "threads still running after forward: " + ", ".join(threads)
        act = Activity.from_message(msg.get("activity") or {})
        self._operators(act, f"trial {i + 1}", int(msg.get("launches", 0)), calls=1)
        self._stream_order(act, f"trial {i + 1}")
        self.activity.add(act)
        cmp = j.check(msg, ref_out, inputs, opts, check_l2=self.degenerate, precise=self.precise(seed))
        sb.send({"op": "ack"})
        if (cmp.mismatched or 0.0) > 0.5 and _has_parameters(self.ref_model):
            cmp.message = f"{cmp.message}; {WEIGHTS_HINT}"
        self.trials.append(
            TrialReport(
                seed=seed, ok=cmp.ok, max_abs_err=cmp.max_abs_err, max_rel_err=cmp.max_rel_err, message=cmp.message
            )
        )
        if self.flags.get(Flag.no_custom_kernel):
            raise _Verdict(Status.rejected, self.flags[Flag.no_custom_kernel])
        if not cmp.ok:
            raise _Verdict(Status.incorrect, f"trial {i + 1} of {opts.trials}: {cmp.message}")
        errs = cmp.err_l2 or []
        self.err_l2 = [max(a, b) for a, b in zip(self.err_l2, errs)] if self.err_l2 else list(errs)

    def _operators(
        self, act: Activity, where: str, python_launches: int, calls: int, harness: Activity | None = None
    ) -> None:
        """The operator rule on what one window recorded (`calls` forward calls in it; `harness`: the
        kernels and ops the harness itself ran in the window, by count, taken off the candidate's)."""
        if act.tampered:
            self.flags[Flag.activity_tampered] = f"the activity record of {where} was stopped or replaced"
            return
        harness = harness or Activity()
        ref = self.ref_activity
        if self.device_activity:
            cand = Activity(kernels=act.kernels - harness.kernels, kernel_ns=act.kernel_ns)
        else:  # aten ops; own kernels counted where they are launched
            cand, ref = Activity(ops=act.ops - harness.ops), Activity(ops=ref.ops)
        self.base["activity_source"] = "device" if self.device_activity else "aten"
        v = judge_operators(
            cand,
            scaled(ref, calls),
            self.own_names,
            self.opts.torch_ops,
            python_launches=None if self.device_activity else python_launches,
        )
        if v.own_launches == 0:
            self.flags.setdefault(Flag.no_custom_kernel, f"{where}: {v.detail}")
        elif v.own_launches < calls:
            self.flags.setdefault(
                Flag.no_custom_kernel,
                f"{where}: the candidate's own kernels ran {v.own_launches} times in {calls} calls",
            )
        elif v.flag == "torch_compute_op":
            self.flags.setdefault(Flag.torch_compute_op, f"{where}: {v.detail}")

    def _stream_order(self, act: Activity, where: str) -> None:
        """Work forward left unordered with its caller's stream (activity.stream_order)."""
        if act.late:
            self.flags.setdefault(
                Flag.unsynced_work,
                (
                    f"{where}: kernels still ran after forward returned, on a stream its caller's stream never "
                    f"waits for ({fmt_kernels(act.late)}): a consumer of the output would read it unfinished"
                ),
            )
        elif act.early:
            self.flags.setdefault(
                Flag.unsynced_work,
                (
                    f"{where}: kernels on another stream started before the caller's earlier work had finished "
                    f"({fmt_kernels(act.early)}): they did not wait for their inputs"
                ),
            )


def _has_parameters(model) -> bool:
    return isinstance(model, torch.nn.Module) and next(iter(model.parameters()), None) is not None
