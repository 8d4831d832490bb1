"""Each containment layer on its own (in a child process, as the sandbox applies it), the plan's
claims against a live check from inside a real sandbox, strict mode, and `kernelsmith doctor`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kernelsmith.errors import UserError
from kernelsmith.evaluate.sandboxing import containment, landlock, seccomp
from kernelsmith.evaluate.sandboxing.isolation import bwrap_works

REPO = Path(__file__).resolve().parents[2]


def _child(code: str, tmp_path: Path) -> dict:
    """Run `code` in a fresh Python (it prints one JSON object); return that object."""
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


PROBES = """
    import json, os, socket, signal
    def attempt(fn):
        try:
            fn()
            return "allowed"
        except OSError as exc:
            return type(exc).__name__
    out = {}
"""


@pytest.mark.skipif(not seccomp.supported(), reason="no seccomp filter for this platform")
def test_seccomp_denies_sockets_tracing_and_foreign_signals(tmp_path):
    got = _child(
        PROBES
        + """
    from kernelsmith.evaluate.sandboxing import seccomp
    parent = os.getppid()
    seccomp.install()
    out["tcp"] = attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))
    out["udp"] = attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
    out["unix"] = attempt(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
    out["socketpair"] = attempt(lambda: socket.socketpair())
    out["kill parent"] = attempt(lambda: os.kill(parent, 0))
    out["kill all"] = attempt(lambda: os.kill(-1, 0))
    out["kill self"] = attempt(lambda: os.kill(os.getpid(), 0))
    out["file"] = attempt(lambda: open("x", "w").close())
    print(json.dumps(out))
    """,
        tmp_path,
    )
    assert got == {
        "tcp": "PermissionError",
        "udp": "PermissionError",
        "unix": "PermissionError",
        "socketpair": "allowed",
        "kill parent": "PermissionError",
        "kill all": "PermissionError",
        "kill self": "allowed",
        "file": "allowed",
    }


def test_seccomp_program_shape():
    for machine in ("x86_64", "aarch64"):
        code = seccomp.program(1234, machine)
        assert len(code) % 8 == 0 and 10 < len(code) // 8 < 64


@pytest.mark.skipif(landlock.abi_version() < 4, reason="needs Landlock ABI 4 (Linux 6.7+)")
def test_landlock_confines_writes_and_tcp(tmp_path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    got = _child(
        PROBES
        + f"""
    from kernelsmith.evaluate.sandboxing import landlock
    srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
    port = srv.getsockname()[1]
    landlock.restrict([{str(scratch)!r}], ["/dev/null"])
    out["scratch"] = attempt(lambda: open({str(scratch / 'ok')!r}, "w").close())
    out["outside"] = attempt(lambda: open({str(tmp_path / 'escaped')!r}, "w").close())
    out["dev null"] = attempt(lambda: open("/dev/null", "w").close())
    out["tcp"] = attempt(lambda: socket.create_connection(("127.0.0.1", port), timeout=2))
    out["mem of parent"] = attempt(lambda: open(f"/proc/{{os.getppid()}}/mem", "rb").close())
    print(json.dumps(out))
    """,
        tmp_path,
    )
    assert got["scratch"] == "allowed" and got["dev null"] == "allowed"
    assert got["outside"] == "PermissionError" and not (tmp_path / "escaped").exists()
    assert got["tcp"] == "PermissionError"
    assert got["mem of parent"] == "PermissionError"


@pytest.mark.skipif(landlock.abi_version() < 1, reason="needs Landlock")
@pytest.mark.parametrize("with_rule", [True, False], ids=["cuda-rules", "without-task-rule"])
def test_landlock_lets_cuda_name_its_threads(tmp_path, with_rule):
    """cuInit names its threads by writing /proc/self/task/<tid>/comm (pthread_setname_np on
    another thread); denied, CUDA fails to start (error 304 on the H200). The CUDA rules allow
    exactly that, after the rules are set and for threads started later; another process's comm
    and the rest of /proc stay unwritable."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    got = _child(
        PROBES
        + f"""
    import threading
    from kernelsmith.evaluate.sandboxing import containment, landlock
    dirs, files = containment.writable_paths({str(scratch)!r}, "cuda")
    if not {with_rule!r}:
        files = [f for f in files if not f.startswith("/proc/")]
    landlock.restrict(dirs, files)
    stop = threading.Event()
    t = threading.Thread(target=stop.wait); t.start()
    def name_thread():
        with open(f"/proc/self/task/{{t.native_id}}/comm", "w") as f:
            f.write("ks-worker")
    out["thread comm"] = attempt(name_thread)
    out["own comm"] = attempt(lambda: open("/proc/self/comm", "w").write("ks-main"))
    out["parent comm"] = attempt(lambda: open(f"/proc/{{os.getppid()}}/comm", "w").write("pwned"))
    out["oom of parent"] = attempt(lambda: open(f"/proc/{{os.getppid()}}/oom_score_adj", "w").write("1000"))
    stop.set(); t.join()
    print(json.dumps(out))
    """,
        tmp_path,
    )
    assert got["thread comm"] == ("allowed" if with_rule else "PermissionError"), got
    assert got["parent comm"] == "PermissionError" and got["oom of parent"] == "PermissionError", got


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (a mount namespace)")
def test_procmask_covers_other_processes_and_drops_capabilities(tmp_path):
    """The layer a CUDA sandbox keeps secrets with: its ancestors' /proc entries (environ, stat,
    a thread's id too) unreadable, its own still readable, and no way back once capabilities
    are gone (no unmount, no new /proc)."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    got = _child(
        PROBES
        + f"""
    import ctypes, threading
    from kernelsmith.evaluate.sandboxing import procmask
    parent = os.getppid()
    tids = [t for t in os.listdir(f"/proc/{{parent}}/task") if t != str(parent)]
    out["covered"] = procmask.mask_other_processes({str(scratch)!r}) > 0
    out["parent environ"] = attempt(lambda: open(f"/proc/{{parent}}/environ", "rb").read())
    out["parent stat"] = attempt(lambda: open(f"/proc/{{parent}}/stat", "rb").read())
    out["pid 1 environ"] = attempt(lambda: open("/proc/1/environ", "rb").read())
    out["thread of parent"] = attempt(lambda: [open(f"/proc/{{t}}/environ", "rb").read() for t in tids])
    out["own environ"] = attempt(lambda: open("/proc/self/environ", "rb").read())
    t = threading.Thread(target=lambda: None); t.start(); t.join()
    out["own task"] = attempt(lambda: os.listdir("/proc/self/task"))
    procmask.drop_capabilities()
    out["caps"] = procmask.capabilities()
    libc = ctypes.CDLL(None, use_errno=True)
    out["umount cover"] = "allowed" if libc.umount2(f"/proc/{{parent}}".encode(), 2) == 0 else os.strerror(ctypes.get_errno())
    os.makedirs("p2", exist_ok=True)
    out["new proc"] = "allowed" if libc.mount(b"proc", b"p2", b"proc", 0, None) == 0 else os.strerror(ctypes.get_errno())
    out["parent environ after"] = attempt(lambda: open(f"/proc/{{parent}}/environ", "rb").read())
    print(json.dumps(out))
    """,
        tmp_path,
    )
    assert got["covered"] is True
    for key in ("parent environ", "parent stat", "pid 1 environ", "parent environ after"):
        assert got[key] == "FileNotFoundError", (key, got)
    assert got["thread of parent"] in ("FileNotFoundError", "allowed"), got  # "allowed": no other thread
    assert got["own environ"] == "allowed" and got["own task"] == "allowed", got
    assert got["caps"] == 0, got
    assert got["umount cover"] != "allowed" and got["new proc"] != "allowed", got


def test_cuda_plan_has_no_uid_layer_and_keeps_secrets_with_procmask(monkeypatch):
    """On CUDA the uid layer is off (CUDA IPC maps no memory across uids); as root, procmask
    keeps the secrets guarantee."""
    monkeypatch.delenv("KERNELSMITH_SANDBOX_LAYERS", raising=False)
    monkeypatch.delenv("KERNELSMITH_SANDBOX", raising=False)
    p = containment.plan("cuda")
    assert "uid" in p.off and "CUDA IPC" in p.off["uid"]
    if os.geteuid() == 0:
        assert "procmask" in p.on and p.guarantees()["secrets"] is None
    # the in-process layers are on by default on CUDA too (verified on the H200)
    if landlock.abi_version() >= 6 and seccomp.supported():
        assert {"landlock", "seccomp"} <= set(p.on)
        if os.geteuid() == 0:
            assert p.holds_all(), p.guarantees()


def test_landlock_does_not_claim_secrets():
    """Landlock lets a child read its parent's /proc/PID/environ (measured): it never counts."""
    p = containment.Plan(device="cpu", mode="auto", on={"landlock": "x", "seccomp": "y"}, landlock_abi=7)
    g = p.guarantees()
    assert g["secrets"] is not None and g["writes"] is None and g["network"] is None and g["signals"] is None


def test_bad_settings_are_one_line_errors(monkeypatch):
    monkeypatch.setenv("KERNELSMITH_SANDBOX", "paranoid")
    with pytest.raises(UserError, match="KERNELSMITH_SANDBOX='paranoid'"):
        containment.plan("cpu")
    monkeypatch.setenv("KERNELSMITH_SANDBOX", "auto")
    monkeypatch.setenv("KERNELSMITH_SANDBOX_LAYERS", "landlock,apparmor")
    with pytest.raises(UserError, match="unknown layer 'apparmor'"):
        containment.plan("cpu")


def test_strict_refuses_an_incomplete_host(monkeypatch):
    from kernelsmith.evaluate import EvalPool

    monkeypatch.setenv("KERNELSMITH_SANDBOX", "strict")
    monkeypatch.setenv("KERNELSMITH_SANDBOX_LAYERS", "seccomp")  # no layer for secrets or writes
    with pytest.raises(UserError, match="strict: containment incomplete.*secrets.*writes"):
        EvalPool(device="cpu", workers=1)


def test_none_turns_every_layer_off(monkeypatch):
    monkeypatch.setenv("KERNELSMITH_SANDBOX", "none")
    p = containment.plan("cpu")
    assert not p.on and set(p.off) == set(containment.LAYERS)
    assert p.guarantees()["network"] is not None


# Each layer alone (the combinations are the escape tests' configurations, tests/redteam/test_escapes.py).
LAYER_SETS = [
    "landlock",
    "seccomp",
    "pidns",
    pytest.param("bwrap", marks=pytest.mark.skipif(not bwrap_works(), reason="no bubblewrap")),
]


@pytest.mark.parametrize("layers", LAYER_SETS)
def test_claims_hold_live(monkeypatch, layers, cache_dir):
    """Whatever a layer set claims, a real sandbox confirms from inside: no claim overstates."""
    from kernelsmith.evaluate.sandboxing.doctor import checkup

    monkeypatch.delenv("KERNELSMITH_SANDBOX", raising=False)
    if layers is None:
        monkeypatch.delenv("KERNELSMITH_SANDBOX_LAYERS", raising=False)
    else:
        monkeypatch.setenv("KERNELSMITH_SANDBOX_LAYERS", layers)
    if not containment.plan("cpu").on:
        pytest.skip(f"{layers}: {containment.plan('cpu').off.get(layers)}")
    found = checkup("cpu")
    claims, live = found.plan.guarantees(), found.live_holds()
    for g, why in claims.items():
        if why is None:
            assert live[g] is not False, (g, found.live[g], found.plan.summary())
    assert found.plan.on, found.plan.summary()


def test_doctor_cli(monkeypatch, cache_dir):
    exe = REPO / ".venv/bin/kernelsmith"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "kernelsmith.cli"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELSMITH_SANDBOX")}
    bare = subprocess.run(
        [*cmd, "doctor", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "KERNELSMITH_SANDBOX": "none"},
    )
    assert bare.returncode == 1, bare.stderr
    found = json.loads(bare.stdout.strip().splitlines()[-1])
    assert found["live_holds"]["network"] is False and found["live_holds"]["writes"] is False
    full = subprocess.run([*cmd, "doctor"], capture_output=True, text=True, timeout=120, env=env)
    expected = 0 if containment.plan("cpu").holds_all() else 1
    assert full.returncode == expected, full.stdout + full.stderr
    assert "guarantee" in full.stdout


def test_service_on_other_interfaces_warns_when_not_contained(monkeypatch):
    from kernelsmith.serve.server import containment_warning

    monkeypatch.setenv("KERNELSMITH_SANDBOX", "none")
    assert containment_warning("127.0.0.1", "cpu") is None
    assert containment_warning("::1", "cpu") is None
    warning = containment_warning("0.0.0.0", "cpu")
    assert warning and warning.startswith("WARNING") and "network" in warning
    monkeypatch.delenv("KERNELSMITH_SANDBOX")
    monkeypatch.setenv("KERNELSMITH_SANDBOX_LAYERS", "pidns,landlock,seccomp")
    if containment.plan("cpu").holds_all():  # root and Landlock: all five hold with these
        assert containment_warning("0.0.0.0", "cpu") is None
