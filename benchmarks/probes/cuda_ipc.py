"""Probe (GPU host, as root): which in-process containment layer stops the judge from mapping a
sandbox's CUDA output (CUDA IPC). A child process starts CUDA, makes a tensor, applies one layer,
exports the tensor as the sandbox does (protocol.encode_tensor); this process imports it
(protocol.decode_tensor) and checks its values. One JSON line per case.

Found on the H200 (2026-12-03): with uid + Landlock + seccomp the judge's import failed with
"mapping of buffer object failed"; Landlock alone was fine.

    python3 benchmarks/probes/cuda_ipc.py
"""

import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)

CHILD = r"""
import os, sys, pickle, ctypes
sys.path.insert(0, REPO)
case = CASE
uid = 0x3A000123
if case == "uid before CUDA":
    os.setgroups([]); os.setresgid(uid, uid, uid); os.setresuid(uid, uid, uid)
import torch
from kernelsmith.evaluate import protocol
from kernelsmith.evaluate.sandboxing import seccomp
torch.cuda.init()
t = torch.arange(1 << 20, device="cuda", dtype=torch.float32)
torch.cuda.synchronize()
if case in ("uid after CUDA", "uid + seccomp"):
    os.setgroups([]); os.setresgid(uid, uid, uid); os.setresuid(uid, uid, uid)
if case == "dumpable 0":
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
if case == "no capabilities":
    # capset: version 3, this process, every set empty
    hdr = (ctypes.c_uint32 * 2)(0x20080522, 0)
    data = (ctypes.c_uint32 * 6)()
    assert ctypes.CDLL(None, use_errno=True).capset(hdr, data) == 0, ctypes.get_errno()
if case in ("seccomp", "uid + seccomp"):
    seccomp.install()
msg = protocol.encode_tensor(t)
os.write(1, pickle.dumps(msg))
os.close(1)
sys.stdin.read()  # keep the tensor alive until the parent has mapped it
"""


def main() -> None:
    import pickle

    import torch

    from kernelsmith.evaluate import protocol

    torch.cuda.init()
    for case in (
        "none",
        "seccomp",
        "dumpable 0",
        "no capabilities",
        "uid after CUDA",
        "uid before CUDA",
        "uid + seccomp",
    ):
        code = CHILD.replace("REPO", repr(REPO)).replace("CASE", repr(case))
        child = subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        raw = child.stdout.read()
        out = {"case": case}
        try:
            msg = pickle.loads(raw)
            got = protocol.decode_tensor(msg)
            out["import"] = "ok" if bool((got[:4].cpu() == torch.arange(4.0)).all()) else "wrong values"
            del got
        except Exception as exc:
            out["import"] = f"{type(exc).__name__}: {exc}"[:300]
            out["child_stderr"] = child.stderr.read().decode(errors="replace")[-300:] if child.poll() else ""
        child.stdin.close()
        child.wait(timeout=60)
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
