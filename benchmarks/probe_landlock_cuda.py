"""Probe (GPU host): which part of the Landlock layer stops CUDA from starting. Each case runs in a
fresh process: apply the restriction (before importing torch, as the sandbox does), then
torch.cuda.init() and a kernel; prints one JSON line per case. Found on the H200 (2026-12-03):
with every part on, cudaGetDeviceCount failed with error 304 in every sandbox.

    python3 benchmarks/probe_landlock_cuda.py
"""
import json
import os
import subprocess
import sys
import tempfile

CASE = r"""
import ctypes, json, os, sys
sys.path.insert(0, REPO)
from kernelsmith.evaluate import landlock, containment
case = CASE_NAME
scratch = tempfile_dir
dirs, files = containment.writable_paths(scratch, "cuda")
abi = landlock.abi_version()
if case != "none":
    real = landlock._RulesetAttr
    if case == "fs only":
        landlock._NET_BIND_TCP = landlock._NET_CONNECT_TCP = 0
        landlock._SCOPE_ABSTRACT_UNIX = landlock._SCOPE_SIGNAL = 0
    elif case == "fs + tcp":
        landlock._SCOPE_ABSTRACT_UNIX = landlock._SCOPE_SIGNAL = 0
    elif case == "fs + tcp + signal scope":
        landlock._SCOPE_ABSTRACT_UNIX = 0
    elif case == "fs + /dev writable":
        dirs = dirs + ["/dev", "/tmp", "/run", "/var"]
        landlock._NET_BIND_TCP = landlock._NET_CONNECT_TCP = 0
        landlock._SCOPE_ABSTRACT_UNIX = landlock._SCOPE_SIGNAL = 0
    landlock.restrict(dirs, files)
import torch
try:
    torch.cuda.init()
    x = torch.ones(1024, device="cuda")
    torch.cuda.synchronize()
    print(json.dumps({"case": case, "abi": abi, "cuda": "ok", "sum": float(x.sum())}))
except Exception as exc:
    print(json.dumps({"case": case, "abi": abi, "cuda": f"{type(exc).__name__}: {exc}"[:300]}))
"""

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for case in ("none", "fs only", "fs + /dev writable", "fs + tcp", "fs + tcp + signal scope", "all"):
    scratch = tempfile.mkdtemp()
    code = CASE.replace("REPO", repr(REPO)).replace("CASE_NAME", repr(case)).replace("tempfile_dir", repr(scratch))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HOME": scratch, "TMPDIR": scratch})
    out = proc.stdout.strip().splitlines()
    print(out[-1] if out else json.dumps({"case": case, "exit": proc.returncode, "stderr": proc.stderr[-500:]}),
          flush=True)
