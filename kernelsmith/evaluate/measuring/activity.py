"""What ran during forward, recorded below Python, and what that says about the operator rule.

Recording (in the sandbox and, for the reference, in the judge): a Kineto session, the one
torch.profiler.profile wraps, opened here through torch.autograd's own calls, records every GPU
kernel the process ran (CUPTI activity, on the device) and every aten op that went through the
dispatcher (RecordFunction, in C++). Neither can be hidden by switching off Python dispatch or
torch-function modes, which is how the earlier Python-level recorder was beaten. A candidate could
stop the session outright, or stop it and start its own; each window carries a marker op with a
fresh name, and a window that is no longer recording at its end, or whose marker is missing, was
tampered with.

Deciding (in the judge, on plain counts): kernels are the candidate's own when their name is one
the candidate defines (a Triton `@triton.jit` function, a CUDA `__global__` function) and the
reference does not launch; all others are library kernels. KernelBench's rule ("partial") lets
library kernels do part of the work and fails a candidate whose own kernels do none of it: none
of its own kernels ran, or its library kernels cover every kernel the reference launches (torch
computed the whole reference; whatever else ran beside it is a token). The strict rule ("none")
fails any library compute in forward. On the CPU the same rule runs on aten ops.

Stream order (CUDA trials): the window opens with a spin kernel on the caller's stream that holds
the device for a few milliseconds while the host runs forward, and closes with a second, tiny spin
on the caller's stream right after forward returns. Work that forward ordered on the caller's
stream (on it, or on a side stream joined back by an event) ends before the closing spin starts;
work on a stream the caller never waits for starts with it and ends after it (`late`). A kernel
on another stream that starts before the opening spin ends did not wait for the caller's earlier
work, its inputs included (`early`). Both are read from the device's own timestamps, so they do not
depend on how long the work runs; the hold only has to outlast forward's host time.
"""

from __future__ import annotations

import re
import secrets
from collections import Counter
from dataclasses import dataclass, field

import torch
from torch._C._autograd import _disable_profiler, _enable_profiler, _prepare_profiler, _profiler_enabled
from torch._C._profiler import ProfilerConfig, ProfilerState, _ExperimentalConfig
from torch.profiler import ProfilerActivity

# Bound before candidate code is imported into the sandbox, like the calls imported above: a window
# never looks a name up later. The session is opened with torch.autograd's own calls (the layer
# under torch.profiler.profile, the same in torch 2.11 and 2.13) rather than through
# torch.profiler.profile, whose first use imports torch._inductor (about 1 s of every sandbox's
# start, docs/benchmarks.md).
_KINETO = ProfilerState.KINETO
# torch's Python flag for "a profiler is on", set as torch.autograd.profiler.profile sets it: with
# it set, torch.compile's launchers mark their kernels, and its benchmarking opens no profiler of
# its own (which would end this window).
_python_flag_on = torch.autograd.profiler._run_on_profiler_start
_python_flag_off = torch.autograd.profiler._run_on_profiler_stop
_record_function = torch.profiler.record_function
_sleep = torch.cuda._sleep
_cuda_synchronize = torch.cuda.synchronize

# The window's opening and closing kernels (torch.cuda._sleep launches `spin_kernel`).
SPIN_KERNEL = "spin_kernel"
# A kernel ordered after another starts no earlier than that one ends; one counts as unordered only
# beyond this margin (the granularity of the device's timestamps).
ORDER_SLACK_NS = 1000

# Device work that allocates, fills or copies: the glue every launcher needs, never "compute".
_GLUE_KERNEL = re.compile(
    r"FillFunctor|fill_kernel|direct_copy|CatArrayBatchedCopy|^Memcpy|^Memset|memcpy|memset", re.IGNORECASE
)

# aten ops that allocate, view, copy or describe tensors (the same list the CPU rule has always used).
GLUE_OPS = frozenset(
    """
    empty empty_like empty_strided new_empty new_empty_strided zeros zeros_like new_zeros ones ones_like
    new_ones full full_like new_full fill_ zero_ fill resize_ set_ view view_as reshape _reshape_alias
    _unsafe_view expand expand_as permute transpose transpose_ t t_ as_strided slice select unsqueeze
    squeeze unsqueeze_ squeeze_ flatten unflatten split split_with_sizes chunk narrow unbind detach
    alias lift_fresh lift_fresh_copy clone copy_ _to_copy contiguous to _local_scalar_dense
    is_contiguous sym_size sym_stride sym_numel sym_storage_offset stride size numel dim
    _has_compatible_shallow_copy_type view_as_real view_as_complex _conj _neg_view resolve_conj resolve_neg
    item is_nonzero result_type record_stream
""".split()
)


@dataclass
class Activity:
    """Counts from one or more recorded windows: device kernels (name -> count, ns) and aten ops."""

    kernels: Counter = field(default_factory=Counter)
    kernel_ns: Counter = field(default_factory=Counter)
    ops: Counter = field(default_factory=Counter)
    tampered: bool = False
    windows: int = 0
    late: Counter = field(default_factory=Counter)  # kernels still running after forward returned, unawaited
    early: Counter = field(default_factory=Counter)  # kernels that did not wait for the caller's earlier work
    ordered_windows: int = 0  # windows whose stream order was checked

    def to_message(self) -> dict:
        return {
            "kernels": {k: [int(n), int(self.kernel_ns[k])] for k, n in self.kernels.items()},
            "ops": dict(self.ops),
            "tampered": self.tampered,
            "windows": self.windows,
            "late": dict(self.late),
            "early": dict(self.early),
            "ordered_windows": self.ordered_windows,
        }

    @classmethod
    def from_message(cls, msg) -> Activity:
        """Judge side: plain values only; anything malformed raises ValueError/TypeError."""
        if not isinstance(msg, dict):
            raise TypeError("activity is not a mapping")
        act = cls(tampered=bool(msg.get("tampered")), windows=int(msg.get("windows", 0)))
        for name, pair in dict(msg.get("kernels", {})).items():
            count, ns = pair
            act.kernels[str(name)] = int(count)
            act.kernel_ns[str(name)] = int(ns)
        for name, count in dict(msg.get("ops", {})).items():
            act.ops[str(name)] = int(count)
        for key in ("late", "early"):
            for name, count in dict(msg.get(key, {})).items():
                getattr(act, key)[str(name)] = int(count)
        act.ordered_windows = int(msg.get("ordered_windows", 0))
        return act

    def add(self, other: Activity) -> None:
        self.kernels.update(other.kernels)
        self.kernel_ns.update(other.kernel_ns)
        self.ops.update(other.ops)
        self.late.update(other.late)
        self.early.update(other.early)
        self.tampered |= other.tampered
        self.windows += other.windows
        self.ordered_windows += other.ordered_windows


def scaled(act: Activity, factor: float) -> Activity:
    """The counts of `act` times `factor`, rounded: a window's record for another number of calls."""
    if factor == 1:
        return act
    return Activity(
        kernels=Counter({k: round(n * factor) for k, n in act.kernels.items()}),
        kernel_ns=act.kernel_ns,
        ops=Counter({k: round(n * factor) for k, n in act.ops.items()}),
    )


@dataclass(frozen=True)
class KernelSpan:
    name: str
    stream: int
    start_ns: int
    end_ns: int


def stream_order(spans: list[KernelSpan]) -> tuple[Counter, Counter, set[KernelSpan]] | None:
    """(late, early, the two spins) for a window opened and closed by spins on the caller's stream
    (see the module's docstring), or None when the spins are not there (nothing to conclude)."""
    spins = sorted((k for k in spans if base_name(k.name) == SPIN_KERNEL), key=lambda k: k.start_ns)
    if len(spins) < 2:
        return None
    hold = spins[0]  # launched first, on an idle device: the first spin to start
    closing = [k for k in spins[1:] if k.stream == hold.stream]
    if not closing:
        return None
    close = max(closing, key=lambda k: k.start_ns)  # launched after forward returned: the last on that stream
    late, early = Counter(), Counter()
    for k in spans:
        if k is hold or k is close:
            continue
        if k.end_ns > close.start_ns + ORDER_SLACK_NS:
            late[k.name] += 1
        elif k.stream != hold.stream and k.start_ns < hold.end_ns - ORDER_SLACK_NS:
            early[k.name] += 1
    return late, early, {hold, close}


class ActivityRecorder:
    """One recorded window. `with ActivityRecorder(device) as rec: ...` then `rec.activity`.

    With `hold_cycles` (CUDA), the window checks stream order: call `rec.hold()` right before
    forward and `rec.release()` right after it (see the module's docstring); the two spin kernels
    are the recorder's own and are left out of the counts. With `keep_spans`, every device kernel's
    span (name, stream, start, end) is kept in `rec.spans` (the timing harness reads graph replays)."""

    def __init__(self, device: str, hold_cycles: int = 0, keep_spans: bool = False):
        self.activities = {ProfilerActivity.CPU} | ({ProfilerActivity.CUDA} if device == "cuda" else set())
        self.marker = "ks_window_" + secrets.token_hex(8)
        self.activity = Activity()
        self.entered = False
        self.hold_cycles = int(hold_cycles) if device == "cuda" else 0
        self.keep_spans = keep_spans
        self.spans: list[KernelSpan] = []

    def hold(self) -> None:
        if self.hold_cycles:
            _sleep(self.hold_cycles)

    def release(self) -> None:
        if self.hold_cycles:
            _sleep(1)

    def __enter__(self) -> ActivityRecorder:
        # torch.profiler.profile's defaults: no shapes, memory, stacks, FLOPs or modules.
        config = ProfilerConfig(_KINETO, False, False, False, False, False, _ExperimentalConfig())
        _prepare_profiler(config, self.activities)
        _python_flag_on()
        _enable_profiler(config, self.activities)
        self.entered = True
        with _record_function(self.marker):
            pass
        return self

    def __exit__(self, *exc) -> None:
        act = self.activity
        act.windows = 1
        try:  # a session stopped by someone else, or broken, raises here; one restarted lacks the marker
            if not _profiler_enabled():
                raise RuntimeError("the session was stopped by someone else")
            if not self.entered:
                raise RuntimeError("the window was never entered")
            if ProfilerActivity.CUDA in self.activities:
                _cuda_synchronize()  # every kernel of the window has ended before the session does
            events = _disable_profiler().events()
        except Exception:
            act.tampered = True  # nothing of this window can be trusted
            return
        finally:
            _python_flag_off()
        seen_marker = False
        spans: list[KernelSpan] = []
        for e in events:
            name = e.name()
            if str(e.device_type()).endswith("CUDA"):
                spans.append(KernelSpan(name, int(e.device_resource_id()), int(e.start_ns()), int(e.end_ns())))
            elif name == self.marker:
                seen_marker = True
            elif name.startswith("aten::"):
                act.ops[name[6:]] += 1
        act.tampered = not seen_marker
        if self.keep_spans:
            self.spans = spans
        ours: set[KernelSpan] = set()
        if self.hold_cycles:
            order = stream_order(spans)
            if order is not None:
                act.late, act.early, ours = order
                act.ordered_windows = 1
        for k in spans:
            if k not in ours:
                act.kernels[k.name] += 1
                act.kernel_ns[k.name] += k.end_ns - k.start_ns


def base_name(kernel: str) -> str:
    """'void ns::my_kernel<float, 4>(float*, int)' -> 'my_kernel'; a Triton name is returned as is."""
    kernel = kernel.replace("(anonymous namespace)::", "")
    depth, cut = 0, len(kernel)
    for i, ch in enumerate(kernel):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(depth - 1, 0)
        elif ch == "(" and depth == 0:
            cut = i
            break
    head = kernel[:cut].strip()
    while head.endswith(">"):  # drop trailing template arguments
        depth, i = 0, len(head) - 1
        while i >= 0:
            depth += {">": 1, "<": -1}.get(head[i], 0)
            if depth == 0:
                break
            i -= 1
        head = head[: max(i, 0)].rstrip()
    head = head.split()[-1] if head.split() else head
    return head.split("::")[-1]


def is_glue_kernel(name: str) -> bool:
    return bool(_GLUE_KERNEL.search(name))


@dataclass
class OperatorVerdict:
    """What the rule concluded from one candidate's activity against the reference's."""

    own_launches: int
    own: Counter
    library: Counter  # compute kernels (or aten ops) outside the candidate's own kernels
    flag: str | None = None  # "no_custom_kernel" or "torch_compute_op"
    detail: str | None = None


def fmt_kernels(counts: Counter, limit: int = 6) -> str:
    items = [f"{base_name(k)}{f' x{n}' if n > 1 else ''}" for k, n in counts.most_common(limit)]
    more = len(counts) - limit
    return ", ".join(items) + (f" and {more} more" if more > 0 else "")


def judge_operators(
    cand: Activity, reference: Activity, own_names: set[str], policy: str, python_launches: int | None = None
) -> OperatorVerdict:
    """Apply the operator rule. On CUDA (device kernels recorded) the rule runs on kernels;
    otherwise on aten ops, with the candidate's own launches counted by `python_launches`."""
    device = bool(cand.kernels) or bool(reference.kernels)
    if device:
        ref_names = set(reference.kernels)
        own = Counter({k: n for k, n in cand.kernels.items() if k not in ref_names and is_own_kernel(k, own_names)})
        library = Counter({k: n for k, n in cand.kernels.items() if k not in own and not is_glue_kernel(k)})
        ref_compute = Counter({k: n for k, n in reference.kernels.items() if not is_glue_kernel(k)})
        own_launches = sum(own.values())
        what = "kernels"
    else:
        own = Counter()
        library = Counter({k: n for k, n in cand.ops.items() if k not in GLUE_OPS})
        ref_compute = Counter({k: n for k, n in reference.ops.items() if k not in GLUE_OPS})
        own_launches = int(python_launches or 0)
        what = "aten ops"
    v = OperatorVerdict(own_launches=own_launches, own=own, library=library)
    if own_launches == 0:
        v.flag = "no_custom_kernel"
        v.detail = "none of the candidate's own kernels ran on the device during forward" + (
            f" (library kernels that ran: {fmt_kernels(library)})" if library else ""
        )
    elif policy == "none" and library:
        v.flag = "torch_compute_op"
        v.detail = f"library {what} ran in forward under --torch-ops none: {fmt_kernels(library)}"
    elif policy == "partial" and ref_compute and all(library[k] >= n for k, n in ref_compute.items()):
        v.flag = "torch_compute_op"
        v.detail = (
            f"library {what} ran every compute step of the reference ({fmt_kernels(ref_compute)}), so the "
            f"candidate's own kernels did none of its work"
        )
    return v


def is_own_kernel(kernel: str, own_names: set[str]) -> bool:
    base = base_name(kernel)
    return base in own_names or any(re.fullmatch(re.escape(n) + r"_[0-9a-z]+", base) for n in own_names)
