"""kernelsmith.evaluate.protocol: plain values only, and tensors that travel as data."""

from __future__ import annotations

import collections
import os
import pickle

import pytest
import torch

from kernelsmith.evaluate.protocol import ProtocolError, decode_tensor, dumps, encode_tensor, loads


class Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def test_plain_values_round_trip():
    msg = {"op": "outputs", "n": 3, "x": 1.5, "ok": True, "none": None, "items": [1, (2, "3")], "b": b"\x00\x01"}
    assert loads(dumps(msg)) == msg


@pytest.mark.parametrize(
    "obj",
    [
        pytest.param(os.system, id="function"),
        pytest.param(Evil(), id="reduce-to-os.system"),
        pytest.param(collections.OrderedDict(a=1), id="class-instance"),
        pytest.param(torch.zeros(2), id="tensor"),
        pytest.param({"nested": [Exception("boom")]}, id="nested-exception"),
    ],
)
def test_globals_are_refused(obj):
    data = pickle.dumps(obj, protocol=5)
    with pytest.raises(ProtocolError, match="only plain values are accepted"):
        loads(data)


def test_refused_pickle_runs_nothing(tmp_path):
    marker = tmp_path / "ran"

    class Touch:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    with pytest.raises(ProtocolError):
        loads(pickle.dumps(Touch()))
    assert not marker.exists()


@pytest.mark.parametrize("data", [b"", b"garbage", pickle.dumps({"a": 1})[:-3]], ids=["empty", "garbage", "truncated"])
def test_unreadable_bytes(data):
    with pytest.raises(ProtocolError, match="unreadable message"):
        loads(data)


@pytest.mark.parametrize(
    "t",
    [
        pytest.param(torch.randn(3, 5), id="float32"),
        pytest.param(torch.randn(4, 7).to(torch.bfloat16), id="bfloat16"),
        pytest.param(torch.randn(6, dtype=torch.float64), id="float64"),
        pytest.param(torch.randn(2, 3).half(), id="float16"),
        pytest.param(torch.tensor([[True, False], [False, True]]), id="bool"),
        pytest.param(torch.arange(-5, 5, dtype=torch.int64), id="int64"),
        pytest.param(torch.arange(0, 250, dtype=torch.uint8), id="uint8"),
        pytest.param(torch.tensor(3.25), id="0-dim"),
        pytest.param(torch.tensor(True), id="0-dim-bool"),
        pytest.param(torch.empty(0), id="empty"),
        pytest.param(torch.empty(0, 4, dtype=torch.bfloat16), id="empty-2d"),
        pytest.param(torch.randn(4, 6).t(), id="non-contiguous"),
        pytest.param(torch.randn(10)[2:8:2], id="strided-view"),
        pytest.param(torch.randn(3, dtype=torch.complex64), id="complex64"),
    ],
)
def test_tensor_round_trip(t):
    msg = encode_tensor(t)
    assert msg["kind"] == "cpu"
    # Through the real encoding, as the judge receives it.
    back = decode_tensor(loads(dumps(msg)))
    assert type(back) is torch.Tensor
    assert back.dtype == t.dtype
    assert back.shape == t.shape
    assert back.is_contiguous()
    assert torch.equal(back, t)


def test_decoded_tensor_is_a_copy():
    t = torch.zeros(4)
    back = decode_tensor(encode_tensor(t))
    back += 1
    assert torch.equal(t, torch.zeros(4))


def test_decoded_tensor_drops_subclass_and_grad():
    class Sub(torch.Tensor):
        pass

    t = torch.randn(3, requires_grad=True).as_subclass(Sub)
    back = decode_tensor(encode_tensor(t))
    assert type(back) is torch.Tensor
    assert not back.requires_grad


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param({"kind": "cpu", "dtype": "float32", "shape": [2, 2], "data": b"\x00" * 12}, id="short-data"),
        pytest.param({"kind": "cpu", "dtype": "object", "shape": [1], "data": b"\x00" * 8}, id="unknown-dtype"),
        pytest.param({"kind": "cpu", "dtype": "float32", "shape": ["x"], "data": b""}, id="bad-shape"),
        pytest.param({"kind": "disk", "dtype": "float32", "shape": [1], "data": b"\x00" * 4}, id="unknown-kind"),
        pytest.param({"dtype": "float32"}, id="missing-keys"),
    ],
)
def test_malformed_tensor_messages(bad):
    with pytest.raises(ProtocolError):
        decode_tensor(bad)


def test_empty_data_with_non_empty_shape_is_refused():
    with pytest.raises(ProtocolError):
        decode_tensor({"kind": "cpu", "dtype": "float32", "shape": [2, 3], "data": b""})


def test_an_empty_cuda_tensor_travels_as_its_shape_and_dtype():
    """Issue 41: a KV cache's empty (0-length) CUDA tensor has no memory to share: its IPC handle is
    None, and the judge read 'malformed tensor message: cannot convert NoneType to bytes' as the
    candidate's error. It travels as its shape and dtype, with no data and no IPC handle."""
    from unittest import mock

    import torch

    empty = torch.empty(1, 12, 0, 64, dtype=torch.float16)
    with mock.patch.object(torch.Tensor, "is_cuda", new_callable=mock.PropertyMock, return_value=True):
        msg = encode_tensor(empty)  # as a CUDA tensor: reduce_tensor would give a None handle
    # where it lived rides along (`on`: the mock leaves its device the CPU's), so that the judge compares
    # it on its reference's device, not where its bytes travelled (issue 54: judging/leaves.py)
    assert msg == {
        "kind": "cpu",
        "dtype": "float16",
        "shape": [1, 12, 0, 64],
        "data": b"",
        "on": "cpu",
        "layout": "strided",
    }
    back = decode_tensor(msg)
    assert back.shape == (1, 12, 0, 64) and back.dtype == torch.float16
