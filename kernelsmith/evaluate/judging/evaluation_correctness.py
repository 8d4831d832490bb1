"""The correctness stages of one evaluation, in the judge: every trial on fresh inputs checked against the
reference (then one at each other shape the task names in SHAPES: capture's --shape, its sizes set in the
judge's task module and the sandbox's alike), and the rules over what each trial ran (the operator rule,
work left unordered with the caller's stream, threads left running).

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

from kernelsmith.evaluate.checks import Comparison, flatten_outputs, is_degenerate
from kernelsmith.evaluate.judging.evaluation_timing import _Verdict
from kernelsmith.evaluate.judging.judge import _seed
from kernelsmith.evaluate.measuring.activity import Activity, fmt_kernels, judge_operators, scaled
from kernelsmith.evaluate.protocol import ProtocolError
from kernelsmith.evaluate.result import StageSeconds, Status, TrialReport
from kernelsmith.evaluate.runtime import at_sizes, task_shapes
from kernelsmith.evaluate.sandboxing.sandbox_handle import SandboxFailure
from kernelsmith.evaluate.verdict import Flag, TaskNote

if TYPE_CHECKING:
    from kernelsmith.evaluate.judging.judge import Judge
    from kernelsmith.evaluate.options import EvalOptions
    from kernelsmith.evaluate.sandboxing.sandbox_handle import SandboxHandle

# What a failed second call of a trial says before the comparison (runner/trial.py).
REPEAT_SAID = (
    "the second call on the same inputs, made after the first call's outputs and the allocator's free memory "
    "were overwritten with NaN, is wrong (an output left partly unwritten reads memory it never wrote)"
)

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

    def precise(self, seed: int, sizes: dict[str, int] | None = None) -> Callable[[], list | None]:
        """The precision rule's float64 run of the reference on the inputs of `seed`, asked for only
        when an output is beyond the flat tolerance (once per seed); the float64 copy of Model is made once."""
        done: list[list | None] = []

        def run() -> list | None:
            if done:
                return done[0]
            if self._precise_model is None:
                try:
                    self._precise_model = copy.deepcopy(self.ref_model).to(torch.float64)
                except Exception:  # a Model that cannot be copied or converted: no precision rule
                    self._precise_model = False
            model = self._precise_model
            with at_sizes(self.task, sizes):  # asked for later, within the check of a call
                done.append(None if model is False else self.j.precise_reference(model, self.task, seed))
            return done[0]

        return run

    def _correctness(self, sb: SandboxHandle) -> None:
        """Every trial on fresh inputs; the operator rule over what they ran."""
        t_base = time.monotonic()
        try:
            for i in range(self.opts.trials):
                self._trial(sb, i)
            for k, sizes in enumerate(task_shapes(self.task)):  # a kernel wrong at any shape is incorrect
                self._trial(sb, self.opts.trials + k, sizes)
        finally:  # a trial that ended the evaluation counts up to its end
            self.stages.correctness = time.monotonic() - t_base
        if self.flags.get(Flag.no_custom_kernel):
            raise _Verdict(Status.rejected, self.flags[Flag.no_custom_kernel])

    def _trial(self, sb: SandboxHandle, i: int, sizes: dict[str, int] | None = None) -> None:
        """One trial: the sandbox calls forward twice on the inputs of a fresh seed, the second time after
        the first call's outputs and the allocator's free memory were filled with NaN (runner/trial.py);
        both outputs are checked against the reference's. `sizes`: at another shape of the task's SHAPES."""
        seed = _seed()
        sb.send({"op": "trial", "seed": seed, **({"sizes": sizes} if sizes else {})})
        shape = ", ".join(f"{k}={v}" for k, v in (sizes or {}).items())
        where = f"the trial at {shape} (the task's SHAPES)" if sizes else f"trial {i + 1}"
        with at_sizes(self.task, sizes):
            inputs, ref_out = self.j.run_reference(self.task, self.ref_model, seed)
            precise = self.precise(seed, sizes)  # one float64 run for both calls, if any
            first = self._call(sb, (i, seed), inputs, ref_out, precise, where)
            second = self._call(sb, (i, seed), inputs, ref_out, precise, f"{where}, second call")
        self.trials.append(
            TrialReport(
                seed=seed,
                ok=True,
                max_abs_err=max(first.max_abs_err or 0.0, second.max_abs_err or 0.0),
                max_rel_err=max(first.max_rel_err or 0.0, second.max_rel_err or 0.0),
                message=first.message,
                sizes=sizes,
            )
        )

    def _call(
        self, sb: SandboxHandle, trial: tuple[int, int], inputs: list, ref_out, precise: Callable, where: str
    ) -> Comparison:
        """One call's answer: what it ran, then its outputs (and the inputs) against the reference's."""
        j, opts = self.j, self.opts
        i, seed = trial
        repeat = where.endswith("second call")
        try:
            msg = self._wait(sb, f"correctness {where}")
        except (SandboxFailure, _Verdict) as failure:  # it raised, crashed or timed out: no output
            why = failure.message if isinstance(failure, SandboxFailure) else failure.error
            self.trials.append(TrialReport(seed=seed, ok=False, answered=False, message=why))
            raise
        if msg.get("op") != ("repeat" if repeat else "outputs"):
            raise ProtocolError(f"{where}: the sandbox answered {str(msg.get('op'))[:40]!r}")
        if not repeat:
            self.launches += int(msg.get("launches", 0))
        if i == 0 and not repeat:
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
        self._operators(act, where, int(msg.get("launches", 0)), calls=1)
        if not repeat:
            self._stream_order(act, where)
        self.activity.add(act)
        cmp = j.check(msg, ref_out, inputs, opts, check_l2=self.degenerate, precise=precise)
        sb.send({"op": "ack"})
        if (cmp.mismatched or 0.0) > 0.5 and _has_parameters(self.ref_model):
            cmp.message = f"{cmp.message}; {WEIGHTS_HINT}"
        if self.flags.get(Flag.no_custom_kernel):
            self.trials.append(TrialReport(seed=seed, ok=cmp.ok, message=cmp.message))
            raise _Verdict(Status.rejected, self.flags[Flag.no_custom_kernel])
        if not cmp.ok:
            first = where.removesuffix(", second call") + (f" of {opts.trials}" if where.startswith("trial") else "")
            said = f"{first}: {REPEAT_SAID}" if repeat else first
            self.trials.append(
                TrialReport(
                    seed=seed, ok=False, max_abs_err=cmp.max_abs_err, max_rel_err=cmp.max_rel_err, message=cmp.message
                )
            )
            raise _Verdict(Status.incorrect, f"{said}: {cmp.message}")
        errs = cmp.err_l2 or []
        self.err_l2 = [max(a, b) for a, b in zip(self.err_l2, errs)] if self.err_l2 else list(errs)
        return cmp

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
