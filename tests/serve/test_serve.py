"""`kernelsmith serve` on 127.0.0.1 with CPU workers (Triton interpreter), driven over real HTTP:
verdicts as the CLI gives them, a load test from a second process, a full queue, a worker killed
mid-evaluation, tokens and size limits, and the search and the reward using the service by URL."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from http.client import HTTPConnection

import pytest
from conftest import REPO
from serve_helpers import (
    KERNELSMITH,
    REDTEAM,
    SOFTMAX_HONEST,
    SOFTMAX_TASK,
    evaluate_body,
    http,
    judges,
    start_service,
    variant,
)

pytestmark = pytest.mark.timeout(600)

MAX_QUEUE = 2


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    served = start_service(tmp_path_factory.mktemp("serve"), "--workers", "2", "--max-queue", str(MAX_QUEUE))
    yield served
    code = served.stop()
    assert code == 0, served.log.read_text(errors="replace")


def ks(*args, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(KERNELSMITH), *map(str, args)], capture_output=True, text=True, timeout=timeout, cwd=REPO
    )


def one_error_line(p: subprocess.CompletedProcess, *needles: str) -> None:
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), p.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_verdicts_match_the_cli_and_repeat_from_cache(service):
    status, headers, honest = http("POST", service.url + "/v1/evaluate", evaluate_body(SOFTMAX_HONEST.read_text()))
    assert status == 200, honest
    assert honest["status"] == "correct" and honest["flags"] == [] and honest["device"] == "cpu"
    assert headers["X-Kernelsmith-Cache"] == "miss"

    cheat_path = REDTEAM / "trivial_kernel_beside_torch.py"
    status, _, cheat = http("POST", service.url + "/v1/evaluate", evaluate_body(cheat_path.read_text()))
    assert status == 200, cheat
    cli = ks("eval", SOFTMAX_TASK, cheat_path, "--device", "cpu", "--trials", "2", "--json")
    assert cli.returncode == 0, cli.stderr
    direct = json.loads(cli.stdout.strip().splitlines()[-1])
    assert cheat["status"] != "correct" or cheat["flags"], cheat  # the control: it is caught
    for key in ("status", "correct", "flags", "triton_kernels", "candidate_hash", "task_hash"):
        assert cheat[key] == direct[key], key
    assert "torch_compute_op" in cheat["flags"]

    status, headers, again = http("POST", service.url + "/v1/evaluate", evaluate_body(SOFTMAX_HONEST.read_text()))
    assert status == 200 and headers["X-Kernelsmith-Cache"] == "hit" and again == honest
    # other options are another request: not served from the cache
    status, headers, other = http(
        "POST", service.url + "/v1/evaluate", evaluate_body(SOFTMAX_HONEST.read_text(), trials=1)
    )
    assert status == 200 and headers["X-Kernelsmith-Cache"] == "miss" and len(other["trials"]) == 1


def test_profile_asks_for_counters_beside_the_cached_verdict(service):
    body = evaluate_body(SOFTMAX_HONEST.read_text())
    status, _, plain = http("POST", service.url + "/v1/evaluate", body)
    assert status == 200 and plain["counters"] is None
    status, headers, profiled = http("POST", service.url + "/v1/evaluate", {**body, "profile": True})
    assert status == 200 and headers["X-Kernelsmith-Cache"] == "hit"  # the verdict is the same request's
    assert profiled["counters"]["status"] == "unsupported"  # a CPU service: no Nsight Compute
    assert {k: v for k, v in profiled.items() if k != "counters"} == {k: v for k, v in plain.items() if k != "counters"}
    status, _, bad = http("POST", service.url + "/v1/evaluate", {**body, "profile": True, "profile_timeout": -1})
    assert status == 422 and "profile_timeout" in json.dumps(bad)


def test_bad_requests_get_422_with_the_reason(service):
    status, _, body = http("POST", service.url + "/v1/evaluate", evaluate_body("x", task_source="x = 1"))
    assert status == 422 and "no Model and no get_inputs" in body["detail"]
    status, _, body = http("POST", service.url + "/v1/evaluate", {"task_source": SOFTMAX_TASK.read_text()})
    assert status == 422 and body["detail"][0]["loc"] == ["body", "candidate_source"]
    status, _, body = http("POST", service.url + "/v1/evaluate", evaluate_body("x", device="cuda"))
    assert status == 422 and "evaluates on cpu" in body["detail"]
    status, _, body = http("POST", service.url + "/v1/evaluate", evaluate_body("x", trials=0))
    assert status == 422
    status, _, body = http("POST", service.url + "/v1/evaluate", evaluate_body("x", timeout=10_000))
    assert status == 422 and "limit" in body["detail"]
    status, _, body = http("POST", service.url + "/v1/evaluate", b"{not json")
    assert status == 422
    status, _, spec = http("GET", service.url + "/openapi.json")
    assert status == 200 and "/v1/evaluate" in spec["paths"] and "/v1/health" in spec["paths"]


def test_sources_sent_with_a_byte_order_mark_are_read_as_python_reads_the_file():
    from kernelsmith.serve.app import EvaluateRequest

    task, candidate = SOFTMAX_TASK.read_text(), SOFTMAX_HONEST.read_text()
    req = EvaluateRequest(task_source="\ufeff" + task, candidate_source="\ufeff" + candidate)
    assert (req.task_source, req.candidate_source) == (task, candidate)


BAD_OPTIONS = [
    ("memory_limit", "banana"),
    ("memory_limit", "-5G"),
    ("memory_limit", "1e99G"),
    ("memory_limit", None),
    ("memory_limit", 123),
    ("memory_limit", 0),
    ("timeout", float("nan")),
    ("atol", -1),
    ("atol", float("nan")),
    ("rtol", float("inf")),
    ("warmup_ms", -5),
    ("timing_budget_ms", float("-inf")),
]


def test_every_bad_option_gets_422_naming_it(service):
    """Each option is checked in the options model: 422 naming the field, never a 500 (NaN and
    Infinity are what Python's json writes for them) and never accepted to blame the candidate."""
    url = service.url + "/v1/evaluate"
    for name, value in BAD_OPTIONS:
        raw = json.dumps(evaluate_body("x", **{name: value})).encode()  # allow_nan: NaN, Infinity
        status, _, body = http("POST", url, raw)
        assert status == 422, (name, value, status, body)
        assert body["detail"][0]["loc"] == ["body", name], (name, value, body)
    status, _, body = http("POST", url, evaluate_body("x", min_reps=50, max_reps=10))
    assert status == 422 and "min_reps (50) is above max_reps (10)" in json.dumps(body), body


def test_422_names_the_fields_without_echoing_the_body(service):
    """A 3 MB request that fails validation gets the field names, the messages and short
    excerpts back, not its own 3 MB."""
    url = service.url + "/v1/evaluate"
    big = "# " + "z" * 3_000_000
    status, _, body = http("POST", url, {"candidate_source": big, "trials": "t" * 500})  # no task_source
    assert status == 422, body
    raw = json.dumps(body)
    assert len(raw) < 8192 and "z" * 200 not in raw and "t" * 200 not in raw, raw[:500]
    by_loc = {tuple(e["loc"]): e for e in body["detail"]}
    assert ("body", "task_source") in by_loc and by_loc["body", "task_source"]["msg"] == "Field required"
    assert "input" not in by_loc["body", "task_source"]  # its input was the whole body
    trials = by_loc["body", "trials"]
    assert trials["input"].startswith("ttt") and len(trials["input"]) <= 110 and "integer" in trials["msg"]
    # many errors, and keys as long as the body allows: the whole answer stays small
    many = {f"extra_{i}_" + "k" * 5000: i for i in range(400)}
    status, _, body = http("POST", url, {**evaluate_body("x"), **many})
    assert status == 422
    raw = json.dumps(body)
    assert len(raw) < 8192 and "k" * 200 not in raw, raw[:500]
    assert body["detail"][0]["loc"][1].startswith("extra_") and body["omitted"] > 0


def test_full_queue_answers_429_with_retry_after(service):
    """Three different candidates at once against a queue of two: one is turned away, with a
    Retry-After; the two admitted get their verdicts."""
    answers: list = [None] * 3

    def send(i: int) -> None:
        answers[i] = http("POST", service.url + "/v1/evaluate", evaluate_body(variant(f"queue-{i}")))

    threads = [threading.Thread(target=send, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=400)
    codes = sorted(a[0] for a in answers)
    assert codes.count(429) >= 3 - MAX_QUEUE and codes.count(200) >= 1, codes
    for status, headers, body in answers:
        if status == 429:
            assert int(headers["Retry-After"]) >= 1 and "full" in body["detail"]
        else:
            assert status == 200 and body["status"] == "correct"


LOAD_CLIENT = textwrap.dedent("""
    import json, sys, threading, time, urllib.error, urllib.request
    url, n, clients, variants = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), json.loads(sys.stdin.read())
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    answers, rejected, lock = [None] * n, [0], threading.Lock()
    def one(i):
        body = json.dumps(variants[i % len(variants)]).encode()
        while True:
            req = urllib.request.Request(url + "/v1/evaluate", data=body, headers={"Content-Type": "application/json"})
            try:
                with opener.open(req, timeout=300) as r:
                    answers[i] = json.loads(r.read())["status"]
                    return
            except urllib.error.HTTPError as e:
                if e.code != 429:
                    answers[i] = "http %d" % e.code
                    return
                with lock:
                    rejected[0] += 1
                time.sleep(float(e.headers["Retry-After"]))
    def client(k):
        for i in range(k, n, clients):
            one(i)
    ts = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    t0 = time.time()
    [t.start() for t in ts]
    [t.join() for t in ts]
    print(json.dumps({"answers": answers, "rejected": rejected[0], "seconds": time.time() - t0}))
""")


def test_load_from_another_process_loses_nothing(service):
    """200 requests from 16 concurrent clients in a second process, over 3 distinct candidates:
    every request is answered correctly; identical ones share an evaluation or hit the cache,
    so the service evaluates each candidate once."""
    _, _, before = http("GET", service.url + "/v1/health")
    variants = [evaluate_body(variant(f"load-{i}")) for i in range(3)]
    p = subprocess.run(
        [sys.executable, "-c", LOAD_CLIENT, service.url, "200", "16"],
        input=json.dumps(variants),
        capture_output=True,
        text=True,
        timeout=480,
    )
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert len(out["answers"]) == 200 and set(out["answers"]) == {"correct"}, out
    _, _, after = http("GET", service.url + "/v1/health")
    assert after["requests"] - before["requests"] >= 200
    assert after["evaluated"] - before["evaluated"] == 3, (before, after)
    # 3 distinct candidates against a queue of 2: the first wave is partly turned away
    assert out["rejected"] >= 1 and after["rejected_full"] > before["rejected_full"]
    assert after["in_flight"] == 0


def test_worker_killed_mid_evaluation_gets_a_verdict_and_the_service_keeps_serving(service):
    slow = evaluate_body(variant("killed", sleep_s=1.0), trials=1)
    answer: list = []
    t = threading.Thread(target=lambda: answer.append(http("POST", service.url + "/v1/evaluate", slow)))
    t.start()
    killed: list[int] = []
    end = time.monotonic() + 60
    while time.monotonic() < end and not killed:
        time.sleep(2.0)  # the candidate sleeps 1 s per call: its judge is busy now
        for pid in judges(service.proc.pid):
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
    t.join(timeout=400)
    assert killed, "no judge process found to kill"
    status, _, body = answer[0]
    assert status == 200 and body["status"] == "correct", body  # retried on a fresh worker
    assert service.proc.poll() is None
    status, _, after = http("POST", service.url + "/v1/evaluate", evaluate_body(variant("after-kill")))
    assert status == 200 and after["status"] == "correct"


def test_search_and_reward_use_the_service_by_url(service, tmp_path):
    _, _, before = http("GET", service.url + "/v1/health")
    run_dir = tmp_path / "run"
    p = ks(
        "evolve",
        REPO / "examples/suite/softmax.py",
        "--small",
        "--seed",
        REPO / "examples/suite_seeds/softmax.py",
        "--mutator",
        "tune",
        "--iterations",
        "2",
        "--device",
        "cpu",
        "--eval-url",
        service.url,
        "--run-dir",
        run_dir,
        "--json",
    )
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout.strip().splitlines()[-1])
    assert summary["iterations_done"] == 2 and summary["best"]["status"] == "correct"
    _, _, after = http("GET", service.url + "/v1/health")
    assert after["requests"] - before["requests"] >= 3  # the seed and two tuned children

    from kernelsmith.evaluate.backends.remote import RemoteBackend
    from kernelsmith.evaluate.options import EvalOptions
    from kernelsmith.train.reward import SpeedupReward

    opts = EvalOptions(device="cpu", trials=2, timeout=120, memory_limit="1G")
    backend = RemoteBackend(service.url, options=opts)
    try:
        reward = SpeedupReward(backend, opts)
        reply = "```python\n" + variant("reward") + "```"
        scores = reward(
            completions=[reply, "no code here"],
            task_source=[SOFTMAX_TASK.read_text()] * 2,
            parent_code=[SOFTMAX_HONEST.read_text()] * 2,
        )
    finally:
        backend.close()
    assert scores[0] > 0 and scores[1] == 0.0
    assert reward.last_batch.statuses[0] == "correct"


def test_unreachable_or_malformed_eval_url_is_one_line(tmp_path):
    started = time.monotonic()
    p = ks(
        "evolve",
        SOFTMAX_TASK,
        "--seed",
        SOFTMAX_HONEST,
        "--mutator",
        "tune",
        "--iterations",
        "1",
        "--device",
        "cpu",
        "--run-dir",
        tmp_path / "run",
        "--eval-url",
        "http://127.0.0.1:9",
    )
    one_error_line(p, "unreachable", "127.0.0.1:9")
    assert time.monotonic() - started < 60
    assert not (tmp_path / "run").exists()  # refused before a run directory was made

    from kernelsmith.errors import UserError
    from kernelsmith.evaluate.backends import backend_from_flags
    from kernelsmith.evaluate.backends.remote import RemoteBackend

    with pytest.raises(UserError, match="use http://HOST:PORT"):
        RemoteBackend("ftp://host")
    with pytest.raises(UserError, match="--eval-backend ray contradicts --eval-url"):
        backend_from_flags("ray", None, "http://127.0.0.1:9")
    with pytest.raises(UserError, match="--eval-backend service needs --eval-url"):
        backend_from_flags("service", None, None)
    with pytest.raises(UserError, match="contradict each other"):
        backend_from_flags(None, "auto", "http://127.0.0.1:9")
    # a flag that picks the kind clears what a config file said about the others
    from kernelsmith.evaluate.backends import backend_overrides
    from kernelsmith.evolve.config import load_config

    cfg_file = tmp_path / "c.toml"
    cfg_file.write_text('[backend]\nkind = "service"\nurl = "http://gpu-host:8765"\n')
    cfg = load_config(cfg_file, {"backend": backend_overrides("ray", None, None)})
    assert cfg.backend.kind == "ray" and cfg.backend.url is None
    assert load_config(cfg_file).backend.url == "http://gpu-host:8765"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    served = start_service(
        tmp_path_factory.mktemp("guarded"),
        "--workers",
        "1",
        "--token-env",
        "KS_TEST_TOKEN",
        "--max-body",
        "16K",
        env={"KS_TEST_TOKEN": "s3cret-token"},
    )
    yield served
    served.stop()


def test_token_and_body_limit(guarded):
    url = guarded.url + "/v1/evaluate"
    status, _, health = http("GET", guarded.url + "/v1/health")
    assert status == 200 and health["status"] == "ok"  # health needs no token
    status, headers, body = http("POST", url, evaluate_body("x"))
    assert status == 401 and headers["WWW-Authenticate"] == "Bearer"
    status, _, _ = http("POST", url, evaluate_body("x"), {"Authorization": "Bearer wrong"})
    assert status == 401
    status, _, _ = http("GET", guarded.url + "/v1/hardware")
    assert status == 401
    good = {"Authorization": "Bearer s3cret-token"}
    status, _, body = http("POST", url, evaluate_body("x", trials=0), good)
    assert status == 422  # past the token, stopped by validation
    status, _, body = http("POST", url, evaluate_body("# " + "x" * 20_000), good)
    assert status == 413 and "16384" in body["detail"]
    # the same limit when the client does not announce a length (chunked upload)
    conn = HTTPConnection(guarded.url.split("//")[1], timeout=60)
    conn.putrequest("POST", "/v1/evaluate")
    for k, v in {
        "Authorization": good["Authorization"],
        "Content-Type": "application/json",
        "Transfer-Encoding": "chunked",
    }.items():
        conn.putheader(k, v)
    conn.endheaders()
    payload = json.dumps(evaluate_body("# " + "y" * 20_000)).encode()
    for i in range(0, len(payload), 4096):
        chunk = payload[i : i + 4096]
        conn.send(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
    conn.send(b"0\r\n\r\n")
    resp = conn.getresponse()
    assert resp.status == 413
    conn.close()


def test_token_is_checked_before_the_body(guarded):
    """Without the token, nothing about the body is looked at: a malformed or oversized body
    gets 401, not 422 or 413; with it, the body is judged as usual."""
    url = guarded.url + "/v1/evaluate"
    good = {"Authorization": "Bearer s3cret-token"}
    for body in (b"{not json", {"task_source": "x"}, evaluate_body("x", trials=0), evaluate_body("# " + "x" * 20_000)):
        status, headers, answer = http("POST", url, body)
        assert status == 401 and headers["WWW-Authenticate"] == "Bearer", (status, answer)
        status, _, answer = http("POST", url, body, {"Authorization": "Bearer wrong"})
        assert status == 401, (status, answer)
    status, _, answer = http("POST", url, b"{not json", good)
    assert status == 422 and answer["detail"][0]["type"] == "json_invalid"
    status, _, answer = http("POST", url, {"task_source": "x"}, good)
    assert status == 422 and answer["detail"][0]["loc"] == ["body", "candidate_source"]


def test_a_refused_token_names_its_variable_and_whether_one_was_sent(guarded, monkeypatch):
    """Issue 29: the 401 said only 'set the variable that backend.token_env names'."""
    from kernelsmith.errors import UserError
    from kernelsmith.evaluate.backends import BackendConfig, open_backend
    from kernelsmith.evaluate.options import EvalOptions
    from kernelsmith.task import Task

    task = Task.from_file(SOFTMAX_TASK)

    def refusal(token_env: str | None = None) -> str:
        cfg = BackendConfig(kind="service", url=guarded.url, **({"token_env": token_env} if token_env else {}))
        backend = open_backend(cfg, "cpu", None, EvalOptions(device="cpu"))  # health needs no token
        try:
            with pytest.raises(UserError) as info:
                backend.evaluate(task, SOFTMAX_HONEST.read_text())
        finally:
            backend.close()
        return str(info.value)

    monkeypatch.delenv("KERNELSMITH_TOKEN", raising=False)
    assert refusal() == (
        f"the evaluation service at {guarded.url} needs a token and none was sent: $KERNELSMITH_TOKEN is not set "
        "or empty (backend.token_env names the variable to read)"
    )
    monkeypatch.setenv("KS_OTHER_TOKEN", "wrong")
    assert refusal("KS_OTHER_TOKEN") == (
        f"the evaluation service at {guarded.url} refused the token from $KS_OTHER_TOKEN: set it to the service's token"
    )


def test_half_sent_body_is_answered_408_within_seconds(service):
    """A client that announces 1000 bytes, sends 100 and waits does not hold its connection:
    the service answers 408 after the body timeout and closes it."""
    host, port = service.url.split("//")[1].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        head = (
            f"POST /v1/evaluate HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
            "Content-Length: 1000\r\n\r\n"
        )
        sock.sendall(head.encode() + b'{"task_source": "' + b"a" * 83)
        started = time.monotonic()
        answer = b""
        while chunk := sock.recv(65536):  # until the service closes the connection
            answer += chunk
        elapsed = time.monotonic() - started
    assert answer.startswith(b"HTTP/1.1 408"), answer[:300]
    assert elapsed < 10, elapsed
    status, _, health = http("GET", service.url + "/v1/health")
    assert status == 200 and health["status"] == "ok"


def test_serve_refuses_bad_settings_in_one_line(guarded):
    one_error_line(
        ks("serve", "--device", "cpu", "--port", "0", "--token-env", "KS_UNSET_VARIABLE_X"),
        "KS_UNSET_VARIABLE_X",
        "not set",
    )
    port = guarded.url.rsplit(":", 1)[1]
    one_error_line(ks("serve", "--device", "cpu", "--port", port), "cannot listen", port)
    one_error_line(ks("serve", "--device", "cpu", "--port", "0", "--ray-address", "auto"), "--backend ray")


def test_judges_die_with_a_killed_service(tmp_path):
    """kill -9 of the service leaves no judge behind, busy with a candidate nobody waits for."""
    from kernelsmith.evaluate.sandboxing.process import descendants

    served = start_service(tmp_path, "--workers", "1")
    slow = evaluate_body(variant("orphan", sleep_s=10.0), trials=1)

    def post() -> None:
        try:
            http("POST", served.url + "/v1/evaluate", slow, timeout=120)
        except OSError:  # the service is killed under it
            pass

    threading.Thread(target=post, daemon=True).start()
    end = time.monotonic() + 120
    found: list[int] = []
    while time.monotonic() < end and not found:
        time.sleep(0.5)
        found = judges(served.proc.pid)
    assert found, "the service started no judge"
    time.sleep(8.0)  # the judge is up (~4 s on the CPU) and inside the candidate's first 10 s sleep
    below = set(descendants(served.proc.pid))
    served.proc.kill()
    served.proc.wait()
    end = time.monotonic() + 15  # less than the candidate's sleep still to run
    alive = below
    while time.monotonic() < end and alive:
        time.sleep(0.2)
        alive = {p for p in below if os.path.exists(f"/proc/{p}") and _state(p) != "Z"}
    assert not alive, f"processes left behind by the killed service: {sorted(alive)}"


def _state(pid: int) -> str:
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"
