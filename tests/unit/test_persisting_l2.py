"""Finding the CUDA runtime for the persisting-L2 reset (kernelsmith/evaluate/measuring/persisting_l2.py), and
what the reset says where there is none. The reset itself runs on a GPU (tests/evaluate/test_evaluate_cuda.py)."""

from __future__ import annotations

from kernelsmith.evaluate.measuring import persisting_l2

MAPS = """\
7f0000000000-7f0000001000 r--p 00000000 08:01 1 /usr/lib/x86_64-linux-gnu/libc.so.6
7f0000002000-7f0000003000 r-xp 00000000 08:01 2 /venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcudart.so.13
7f0000003000-7f0000004000 r--p 00001000 08:01 2 /venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcudart.so.13
7f0000005000-7f0000006000 rw-p 00000000 00:00 0
7f0000007000-7f0000008000 r-xp 00000000 08:01 3 /venv/lib/python3.12/site-packages/torch/lib/libcudart_stub.so
"""


def test_the_runtime_torch_loaded_is_found_in_the_process_maps(tmp_path):
    maps = tmp_path / "maps"
    maps.write_text(MAPS)
    assert persisting_l2.loaded_cudart(maps) == ["/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcudart.so.13"]
    assert persisting_l2.loaded_cudart(tmp_path / "absent") == []


def test_the_wheels_layouts_are_searched(tmp_path, monkeypatch):
    for sub, name in (("nvidia/cu13/lib", "libcudart.so.13"), ("nvidia/cuda_runtime/lib", "libcudart.so.12")):
        (tmp_path / sub).mkdir(parents=True)
        (tmp_path / sub / name).write_bytes(b"")
    monkeypatch.setattr(persisting_l2.sys, "path", [str(tmp_path)])
    assert persisting_l2.wheel_cudart() == [
        str(tmp_path / "nvidia/cu13/lib/libcudart.so.13"),
        str(tmp_path / "nvidia/cuda_runtime/lib/libcudart.so.12"),
    ]


def test_without_a_runtime_the_reset_says_so_rather_than_failing(tmp_path):
    runtime = persisting_l2.Runtime([str(tmp_path / "libcudart.so.13")])
    note = runtime.reset()
    assert note is not None and note.startswith("persisting L2 lines not reset before timing: no CUDA runtime")
    assert runtime.limit() is None
