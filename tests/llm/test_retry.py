"""The shared Retry-After parser and the two tenacity retry policies (LLM client, service client).

Fakes stand in for the network where they can; the service client's end-to-end cases use a
scripted HTTP server on 127.0.0.1. Every wait goes to a recording sleep, so nothing waits.
"""

from __future__ import annotations

import asyncio
import email.message
import email.utils
import http.client
import http.server
import io
import json
import random
import socket
import threading
import urllib.error

import openai
import pytest

try:  # the HTTP library of the installed openai release (newer releases ship it as httpx2)
    import httpx2 as httpx
except ImportError:
    import httpx

from kernelsmith.errors import UserError
from kernelsmith.evaluate.backends import remote
from kernelsmith.evaluate.backends.remote import RemoteBackend
from kernelsmith.llm import LLMClient, LLMConfig, ModelSpec
from kernelsmith.llm import client as llm_client
from kernelsmith.retry import MAX_RETRY_AFTER_S, parse_retry_after

NOW = 1_700_000_000.0


def http_date(t: float) -> str:
    return email.utils.formatdate(t, usegmt=True)


# -- the parser ---------------------------------------------------------------------------------


def test_seconds_are_read_and_clamped():
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after(" 2.5 ") == 2.5
    assert parse_retry_after("0") == 0.0
    assert parse_retry_after("-5") == 0.0  # negative: no wait, not a wait backwards
    assert parse_retry_after("100000") == MAX_RETRY_AFTER_S == 600.0  # capped by default
    assert parse_retry_after("inf") == MAX_RETRY_AFTER_S
    assert parse_retry_after("3600", cap=60.0) == 60.0
    assert parse_retry_after("-inf", cap=60.0) == 0.0


def test_missing_or_bad_values_give_the_default():
    for value in (None, "", "   ", "soon", "nan", "1 2", "Mon, 99 Foo 2024 99:99:99 GMT"):
        assert parse_retry_after(value) is None, value
        assert parse_retry_after(value, 1.0) == 1.0, value


def test_http_dates_count_from_now():
    assert parse_retry_after(http_date(NOW + 30), now=NOW) == 30.0
    assert parse_retry_after(http_date(NOW - 30), now=NOW) == 0.0  # in the past: go now
    assert parse_retry_after(http_date(NOW + 86400), now=NOW) == MAX_RETRY_AFTER_S
    assert parse_retry_after(http_date(NOW + 86400), now=NOW, cap=60.0) == 60.0
    # RFC 850 and asctime forms are HTTP dates too; "-0000" is read as GMT, not local time
    assert parse_retry_after("Tue, 14 Nov 2023 22:13:40 -0000", now=NOW) == 20.0
    assert parse_retry_after("Tue Nov 14 22:13:50 2023", now=NOW) == 30.0
    assert parse_retry_after(http_date(NOW + 5_000_000)) == 0.0  # without `now`: today's clock, long past that


def test_milliseconds_unit_reads_numbers_only():
    assert parse_retry_after("1500", unit=1e-3) == 1.5
    assert parse_retry_after("-3", unit=1e-3) == 0.0
    assert parse_retry_after(http_date(NOW + 30), unit=1e-3, now=NOW) is None


# -- the LLM client's policy --------------------------------------------------------------------

REQUEST = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")


def status_error(status: int, **headers: str) -> openai.APIStatusError:
    response = httpx.Response(status, headers=headers, request=REQUEST)
    return openai.APIStatusError(f"HTTP {status}", response=response, body={"message": f"status {status}"})


class RecordingSleep:
    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


class Script:
    """A stand-in for one request: raises the scripted exceptions in turn, then answers "ok"."""

    def __init__(self, *failures: BaseException) -> None:
        self.failures, self.calls = list(failures), 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return "ok"


def llm(**overrides) -> tuple[LLMClient, RecordingSleep]:
    sleep = RecordingSleep()
    config = LLMConfig(base_url="http://127.0.0.1:9/v1", models=[ModelSpec(name="m")], **overrides)
    return LLMClient(config, seed=0, sleep=sleep), sleep


def test_llm_retries_rate_limits_server_errors_and_connections_only():
    for status in (408, 429, 500, 502, 503, 504):
        assert llm_client._retryable(status_error(status)), status
    for status in (400, 401, 403, 404, 422):
        assert not llm_client._retryable(status_error(status)), status
    assert llm_client._retryable(openai.APIConnectionError(request=REQUEST))
    assert llm_client._retryable(openai.APITimeoutError(request=REQUEST))
    bad_body = openai.APIResponseValidationError(httpx.Response(200, request=REQUEST), body="<html>")
    assert not llm_client._retryable(bad_body)
    assert not llm_client._retryable(ValueError("not a network error"))


def test_llm_retry_after_prefers_milliseconds_then_seconds_then_date():
    assert llm_client._retry_after(status_error(429, **{"retry-after-ms": "250", "retry-after": "9"})) == 0.25
    assert llm_client._retry_after(status_error(429, **{"retry-after-ms": "x", "retry-after": "9"})) == 9.0
    assert llm_client._retry_after(status_error(429, **{"retry-after": "99999"})) == 600.0
    assert llm_client._retry_after(status_error(503)) is None
    assert llm_client._retry_after(status_error(429, **{"retry-after": http_date(NOW + 10**9)})) == 600.0


def test_llm_policy_gives_up_after_max_retries_with_the_last_error():
    client, sleep = llm(max_retries=3)
    script = Script(*(status_error(502) for _ in range(10)))
    with pytest.raises(openai.APIStatusError) as info:
        asyncio.run(client._retrying()(script))
    assert info.value.status_code == 502 and script.calls == 4 and len(sleep.waits) == 3


def test_llm_policy_does_not_retry_a_bad_request():
    client, sleep = llm()
    for exc in (status_error(404), status_error(401), ValueError("bug")):
        script = Script(exc)
        with pytest.raises(type(exc)):
            asyncio.run(client._retrying()(script))
        assert script.calls == 1 and sleep.waits == []


def test_llm_policy_honours_retry_after_and_backs_off_otherwise():
    client, sleep = llm(backoff_base=1.0, backoff_max=4.0)
    failures = [status_error(429, **{"retry-after": "7"}), openai.APIConnectionError(request=REQUEST)]
    failures += [status_error(503)] * 4
    script = Script(*failures)
    assert asyncio.run(client._retrying()(script)) == "ok" and script.calls == 7
    assert sleep.waits[0] == 7.0
    # backoff counts every retry, the Retry-After one included: ceilings 2, 4, then capped at 4
    ceilings = [2.0, 4.0, 4.0, 4.0, 4.0]
    assert all(0.5 * c <= w <= c for w, c in zip(sleep.waits[1:], ceilings, strict=True)), sleep.waits


def test_llm_jitter_stream_does_not_depend_on_a_give_up():
    client, sleep = llm(max_retries=2)
    with pytest.raises(openai.APIStatusError):
        asyncio.run(client._retrying()(Script(*(status_error(500) for _ in range(3)))))
    assert len(sleep.waits) == 2
    fresh = random.Random("0:jitter")
    fresh.uniform(0.5, 1.0), fresh.uniform(0.5, 1.0)
    assert client._jitter_rng.random() == fresh.random()  # two draws for two waits, none for the give-up


# -- the service client's policy ----------------------------------------------------------------


def http_error(code: int, retry_after: str | None = None, body: bytes = b"{}") -> urllib.error.HTTPError:
    headers = email.message.Message()
    if retry_after is not None:
        headers["Retry-After"] = retry_after
    return urllib.error.HTTPError("http://127.0.0.1:9/v1/evaluate", code, "status", headers, io.BytesIO(body))


class Calls:
    """A stand-in for one HTTP request: raises the scripted exceptions in turn, then answers."""

    def __init__(self, *failures: BaseException) -> None:
        self.failures, self.calls = list(failures), 0

    def __call__(self) -> dict:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return {"ok": True}


def policy(attempts: int = 3, queue_wait: float = 3600.0, backoff_max: float = 30.0):
    waits: list[float] = []
    return remote._RetryPolicy(attempts, queue_wait, backoff_max, waits.append), waits


def test_service_retries_full_queue_server_errors_and_dropped_connections_only():
    for code in (429, 500, 502, 503):
        assert remote._retryable(http_error(code)), code
    for code in (400, 401, 403, 404, 422):
        assert not remote._retryable(http_error(code)), code
    dropped = (
        urllib.error.URLError("refused"),
        ConnectionRefusedError(),
        ConnectionResetError(),
        TimeoutError(),
        http.client.RemoteDisconnected("closed"),
        OSError("network is down"),
    )
    for exc in dropped:
        assert remote._retryable(exc), exc
    assert not remote._retryable(ValueError("bad json"))


def test_service_policy_counts_failures_not_full_queues():
    p, waits = policy(attempts=3)
    calls = Calls(http_error(429, "2"), http_error(503), http_error(429, "1"), ConnectionResetError())
    assert p.retrying(calls) == {"ok": True} and calls.calls == 5 and p.failures == 2
    assert 2.0 <= waits[0] <= 2.5 and 1.0 <= waits[2] <= 1.5  # Retry-After plus up to 0.5 s of jitter
    assert 0.25 <= waits[1] <= 0.5 and 0.5 <= waits[3] <= 1.0  # 0.5 s doubling, times U(0.5, 1)


def test_service_policy_gives_up_after_attempts_failures():
    p, waits = policy(attempts=4, backoff_max=0.75)
    calls = Calls(*(http_error(502) for _ in range(10)))
    with pytest.raises(urllib.error.HTTPError) as info:
        p.retrying(calls)
    assert info.value.code == 502 and calls.calls == 4 and p.failures == 4 and len(waits) == 3
    assert all(w <= 0.75 for w in waits)  # backoff_max caps the backoff


def test_service_policy_honours_retry_after_on_server_errors_capped_at_a_minute():
    p, waits = policy()
    assert p.retrying(Calls(http_error(503, "4"), http_error(429, "3600"), http_error(503, "junk"))) == {"ok": True}
    assert waits[0] == 4.0 and 60.0 <= waits[1] <= 60.5 and 0.5 <= waits[2] <= 1.0


def test_service_policy_waits_out_a_full_queue_until_the_deadline():
    p, waits = policy(attempts=1)
    calls = Calls(*(http_error(429, "5") for _ in range(20)))
    p.queue_deadline = float("-inf")
    with pytest.raises(urllib.error.HTTPError) as info:
        p.retrying(calls)
    assert info.value.code == 429 and calls.calls == 1 and p.failures == 0
    p, waits = policy(attempts=1)
    assert p.retrying(Calls(*(http_error(429, "5") for _ in range(20)))) == {"ok": True}  # deadline an hour off
    assert len(waits) == 20 and p.failures == 0


def test_service_policy_does_not_retry_a_bad_request():
    for exc in (http_error(400), http_error(401), ValueError("bad json")):
        p, waits = policy()
        calls = Calls(exc)
        with pytest.raises(type(exc)):
            p.retrying(calls)
        assert calls.calls == 1 and waits == []


# -- the service client end to end, against a scripted server on 127.0.0.1 -----------------------


class ScriptedService:
    """/v1/health answers; /v1/thing answers the scripted (status, headers, body) steps in turn, then 200."""

    def __init__(self, steps: list[tuple[int, dict, dict]]) -> None:
        self.steps, self.hits = list(steps), 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/v1/health":
                    status, headers, body = 200, {}, {"workers": 2}
                else:
                    outer.hits += 1
                    status, headers, body = outer.steps.pop(0) if outer.steps else (200, {}, {"done": True})
                data = json.dumps(body).encode()
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def __enter__(self) -> ScriptedService:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def waits(monkeypatch) -> list[float]:
    recorded: list[float] = []
    monkeypatch.setattr(RemoteBackend, "_sleep", staticmethod(recorded.append))
    return recorded


def get(backend: RemoteBackend) -> dict:
    try:
        return backend._request("GET", "/v1/thing", None, 10.0)
    finally:
        backend.close()


def test_backend_waits_out_queue_and_failures_then_answers(waits):
    steps = [(429, {"Retry-After": "3"}, {"detail": "full"}), (503, {}, {"detail": "restarting"})]
    with ScriptedService(steps) as s:
        assert get(RemoteBackend(s.url)) == {"done": True}
        assert s.hits == 3
    assert 3.0 <= waits[0] <= 3.5 and 0.25 <= waits[1] <= 0.5


def test_backend_final_errors_are_one_line(waits):
    cases = [
        (
            [(503, {}, {"detail": "busy"})] * 10,
            {"attempts": 3},
            "unreachable or failing after 3 attempts: HTTP 503: busy",
        ),
        ([(429, {"Retry-After": "1"}, {"detail": "full"})] * 10, {"queue_wait": 0.0}, "stayed full for 0 s"),
        ([(401, {}, {"detail": "no"})], {}, r"needs a token and none was sent: \$KERNELSMITH_TOKEN is not set"),
        ([(401, {}, {"detail": "no"})], {"token": "t"}, r"refused the token from \$KERNELSMITH_TOKEN"),
        ([(400, {}, {"detail": "bad field"})], {}, r"refused the request \(400\): bad field"),
    ]
    for steps, kwargs, message in cases:
        with ScriptedService(steps) as s:
            with pytest.raises(UserError, match=message) as info:
                get(RemoteBackend(s.url, **kwargs))
            assert "\n" not in str(info.value)
            assert s.hits == (3 if "after 3" in message else 1)


def test_backend_unreachable_fails_after_the_health_checks_two_attempts(waits):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(UserError, match=f"127.0.0.1:{port} is unreachable or failing after 2 attempts"):
        RemoteBackend(f"http://127.0.0.1:{port}")
    assert len(waits) == 1 and 0.25 <= waits[0] <= 0.5
