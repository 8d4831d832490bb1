"""How a profiled forward's device time is read (kernelsmith/capture/profile.py read_times), on events
as torch.profiler lists them on CUDA: a kernel a torch op launches is linked to the op's range, a
Triton kernel launched from Python may be linked to none, and every range has a mirror on the GPU
timeline that spans the gaps between kernels. The profiler's events are built here (CI has no GPU)."""

from __future__ import annotations

from types import SimpleNamespace

from torch.autograd import DeviceType  # pyright: ignore[reportPrivateImportUsage]

from kernelsmith.capture.profile import _OP, FORWARD, read_times


def _cpu(name: str, device_us: float, annotation: bool = True):
    return SimpleNamespace(
        name=name,
        device_type=DeviceType.CPU,
        device_time_total=device_us,
        cpu_time_total=1.0,
        is_user_annotation=annotation,
    )


def _gpu(name: str, us: float, annotation: bool = False):
    return SimpleNamespace(
        name=name, device_type=DeviceType.CUDA, device_time_total=us, cpu_time_total=0.0, is_user_annotation=annotation
    )


def _profile(*events):
    return SimpleNamespace(events=lambda: list(events))


def test_a_kernel_linked_to_no_range_still_counts_in_the_forward_and_mirrors_never_do():
    prof = _profile(
        _cpu(FORWARD, 10.0),  # the profiler linked only the aten op's kernel to the forward
        _cpu(f"{_OP}0", 10.0),
        _cpu(f"{_OP}1", 0.0),  # the patch's kernel: its Triton launch linked to no range
        _cpu("aten::mm", 10.0, annotation=False),
        _gpu("gemm_kernel", 10.0),
        _gpu("rmsnorm_kernel", 4.0),
        _gpu("Memcpy DtoD (Device -> Device)", 1.0),
        _gpu(FORWARD, 900.0, annotation=True),  # the forward's mirror: first kernel to last, gaps and all
        _gpu(f"{_OP}0", 300.0, annotation=True),
        _gpu(f"{_OP}1", 50.0),  # a mirror the profiler did not mark: known by its range's name
        _cpu("triton_poi_fused_add_0", 0.0, annotation=False),  # Inductor's range around its launch...
        _gpu("triton_poi_fused_add_0", 2.0),  # ...named as its kernel, which counts
    )
    times = read_times(prof, 2, "cuda", 0.0)  # pyright: ignore[reportArgumentType]
    assert times.total_us == 17.0 and times.per_op_us == [10.0, 0.0]


def test_where_every_kernel_is_linked_the_forward_reads_as_before():
    prof = _profile(
        _cpu(FORWARD, 14.0), _cpu(f"{_OP}0", 14.0), _gpu("k", 10.0), _gpu("k2", 4.0), _gpu(FORWARD, 99.0, True)
    )
    assert read_times(prof, 1, "cuda", 0.0).total_us == 14.0  # pyright: ignore[reportArgumentType]
    no_kernels = _profile(_cpu(FORWARD, 14.0))  # a torch whose profile lists no device events
    assert read_times(no_kernels, 0, "cuda", 0.0).total_us == 14.0  # pyright: ignore[reportArgumentType]
