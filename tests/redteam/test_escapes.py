"""Escapes from the sandbox, each beside an honest softmax (so no static check can stop them),
as a user runs them: a driver process started with secrets in its environment evaluates every
escape on one pool, then an honest control. This test holds what the escapes aim at: stand-ins
for the project, the run store and the cache, a process of the user, a loopback service.

Configurations: every layer the host allows; the same without bubblewrap (GPU images often
lack it; docs/integrity.md); on the CPU, the layers a CUDA sandbox gets as root without
bubblewrap (procmask, landlock, seccomp: no PID namespace, no uid of its own), so CI checks
them; and on CUDA (`pytest -m cuda`) every layer the host allows.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from kernelsmith.evaluate import EvalResult, Status

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SOFTMAX = REPO / "examples/softmax/task.py"
HONEST = REPO / "examples/softmax/triton_softmax.py"
ESCAPES = {
    "secrets": HERE / "candidates/env_secret_leak.py",
    "writes": HERE / "escapes/write_outside.py",
    "signals": HERE / "escapes/kill_processes.py",
    "network": HERE / "escapes/network_loopback.py",
    "processes": HERE / "candidates/detached_child.py",
}
SECRETS = {"KS_TEST_API_KEY": "sk-redteam-secret-123", "HF_TOKEN": "hf-redteam-456"}
CANARY = ("KS_REDTEAM_CANARY", "visible-redteam-canary-789")
VICTIM = "sleep 4243"
STORE_BYTES = b"SQLite format 3\0 stand-in run store"

_DRIVER = textwrap.dedent("""
    import json, sys
    from kernelsmith.evaluate import EvalOptions, EvalPool
    from kernelsmith.task import Task
    device, task, *candidates = sys.argv[1:]
    opts = EvalOptions(device=device, timeout=90.0, memory_limit="8G", trials=1, compile_baseline=False)
    with EvalPool(device=device, workers=1, options=opts) as pool:
        for path in candidates:
            r = pool.evaluate(Task.from_file(task), open(path).read(), opts)
            print(json.dumps({"candidate": path, "result": r.model_dump(mode="json")}), flush=True)
""")

CONFIGS = [
    pytest.param(("cpu", None), id="cpu-all-layers"),
    pytest.param(("cpu", "pidns,uid,landlock,seccomp"), id="cpu-without-bwrap"),
    pytest.param(("cpu", "procmask,landlock,seccomp"), id="cpu-layers-of-cuda"),
    # KS_CUDA_LAYERS: a subset, for probing one layer on a GPU host.
    pytest.param(("cuda", os.environ.get("KS_CUDA_LAYERS")), id="cuda-all-layers", marks=pytest.mark.cuda),
]


@dataclass
class Run:
    device: str
    results: dict[str, EvalResult]
    targets: list[Path]
    store: Path
    victim: subprocess.Popen
    tcp: socket.socket
    udp: socket.socket
    survivors: list[str]
    log: str


def _sleepers(marker: str) -> list[str]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    cmd = fh.read().replace(b"\0", b" ").decode("utf-8", "replace")
            except OSError:
                continue
            if marker in cmd and "pytest" not in cmd:
                out.append(f"{entry}: {cmd.strip()}")
    return out


@pytest.fixture(scope="module", params=CONFIGS)
def run(request, tmp_path_factory, cache_dir) -> Run:
    device, layers = request.param
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    base = tmp_path_factory.mktemp("escape-targets")
    targets = [base / "project", base / "run", base / "cache"]
    for d in targets:
        d.mkdir()
        d.chmod(0o755)
    store = base / "run" / "run.sqlite"
    store.write_bytes(STORE_BYTES)
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(4)
    tcp.setblocking(False)
    port = tcp.getsockname()[1]
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", port))
    udp.setblocking(False)
    victim = subprocess.Popen(VICTIM.split(), start_new_session=True)
    env = {
        **os.environ,
        **SECRETS,
        CANARY[0]: CANARY[1],
        "KS_REDTEAM_TARGETS": os.pathsep.join(map(str, targets)),
        "KS_REDTEAM_VICTIM": VICTIM,
        # its own marker for the detached processes: test_redteam_cpu.py runs the same candidate on
        # another xdist worker and counts (and kills) every "sleep 3137" it sees
        "KS_REDTEAM_SLEEP": "4137",
        "KS_REDTEAM_PORT": str(port),
    }
    env.pop("KERNELSMITH_SANDBOX", None)
    if layers is not None:
        env["KERNELSMITH_SANDBOX_LAYERS"] = layers
    else:
        env.pop("KERNELSMITH_SANDBOX_LAYERS", None)
    # without bubblewrap every sandbox of the judge is forked from its template, its first included (on the
    # H100, 2026-12-07, the first and the first spares were spawned while the template imported, and the
    # secrets escape ran spawned: a judge now waits for its template instead)
    order = [*ESCAPES.values(), HONEST]
    proc = subprocess.run(
        [sys.executable, "-c", _DRIVER, device, str(SOFTMAX), *map(str, order)],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    results = {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            results[row["candidate"]] = EvalResult.model_validate(row["result"])
    deadline = time.monotonic() + 2.0
    survivors = _sleepers("sleep 4137")
    while survivors and time.monotonic() < deadline:
        time.sleep(0.1)
        survivors = _sleepers("sleep 4137")
    by_name = {name: results.get(str(path)) for name, path in ESCAPES.items()}
    by_name["honest"] = results.get(str(HONEST))
    r = Run(
        device,
        by_name,
        targets,
        store,
        victim,
        tcp,
        udp,
        survivors,
        log=f"driver exit {proc.returncode}\n{proc.stderr[-4000:]}",
    )
    yield r
    for line in _sleepers("sleep 4137"):
        try:
            os.kill(int(line.split(":")[0]), 9)
        except OSError:
            pass
    victim.kill()
    victim.wait()
    tcp.close()
    udp.close()


def _result(run: Run, name: str) -> EvalResult:
    r = run.results.get(name)
    assert r is not None, f"no verdict for {name}: the evaluation did not come back\n{run.log}"
    return r


def _contained_report(r: EvalResult) -> str:
    """The candidate ran its escapes (its report is there) and none got through."""
    error = r.error or ""
    assert r.status == Status.runtime_error and "escape report:" in error, r
    assert "ESCAPED" not in error, f"an escape got through:\n{error}"
    _started_as_the_layers_allow(r)
    return error


def _started_as_the_layers_allow(r: EvalResult) -> None:
    """Without bubblewrap a sandbox is forked from the judge's template (bubblewrap's PID namespace of its
    own needs a spawned one): the escapes must get through neither."""
    assert r.containment is not None
    layers = r.containment["layers"]
    assert r.containment["start"] == ("spawned" if layers.get("bwrap", "").startswith("on") else "forked"), layers


def test_all_five_guarantees_are_claimed(run):
    """The layers this host allows claim all five guarantees (docs/integrity.md says which layer
    gives which); the escapes below check the claims."""
    r = _result(run, "honest")
    assert r.containment is not None
    assert all(v == "holds" for v in r.containment["guarantees"].values()), r.containment
    _started_as_the_layers_allow(r)


def test_secrets_of_the_launching_process_stay_out_of_reach(run):
    r = _result(run, "secrets")
    assert r.status == Status.runtime_error, r
    _started_as_the_layers_allow(r)
    error = r.error or ""
    assert CANARY[1] in error, f"the canary is missing: the test proves nothing\n{r}"
    for name, value in SECRETS.items():
        for form in (value, value.encode().hex(), value[::-1]):
            assert form not in error, f"secret {name} reached the candidate (as {form!r}):\n{error}"


def test_no_write_outside_scratch(run):
    _contained_report(_result(run, "writes"))
    pkg = REPO / "kernelsmith"
    for d in [*run.targets, pkg, pkg / "evaluate"]:
        assert not (d / "ks-escape-marker.txt").exists(), f"the candidate wrote into {d}"
    assert run.store.read_bytes() == STORE_BYTES, "the candidate changed the run store"


def test_no_signal_reaches_another_process(run):
    _contained_report(_result(run, "signals"))
    assert run.victim.poll() is None, "the user's process was killed by the candidate"
    assert _result(run, "honest").success, "the pool did not survive the attempt"


def test_no_network_even_on_loopback(run):
    _contained_report(_result(run, "network"))
    with pytest.raises(BlockingIOError):
        conn, _ = run.tcp.accept()
        conn.close()
    with pytest.raises(BlockingIOError):
        run.udp.recv(64)


def test_no_process_left_running(run):
    _started_as_the_layers_allow(_result(run, "processes"))
    assert not run.survivors, f"processes left running after the evaluation: {run.survivors}"


def test_honest_control_is_a_success(run):
    r = _result(run, "honest")
    assert r.success, r
