"""The LLM client through the real openai library against the scripted HTTP server.

Backoff waits go to a recording sleep, so retries cost no wall time.
"""

from __future__ import annotations

import asyncio
import json
import random
import socket
import subprocess
import sys
import threading
import time

import pytest
from conftest import REPO
from pydantic import ValidationError

from kernelsmith.errors import UserError
from kernelsmith.llm import (
    LLMAuthError,
    LLMClient,
    LLMConfig,
    LLMError,
    LLMRequestError,
    LLMUnavailable,
    ModelSpec,
    ScriptedServer,
    resolve_api_key,
)

MESSAGES = [
    {"role": "system", "content": "you write kernels"},
    {"role": "user", "content": "make it fast"},
]


class RecordingSleep:
    """Stands in for asyncio.sleep: remembers the waits, waits for nothing."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def make_client(url: str, sleep: RecordingSleep | None = None, **overrides) -> LLMClient:
    models = overrides.pop("models", [ModelSpec(name="coder", price_in=2.0, price_out=8.0)])
    config = LLMConfig(base_url=url, models=models, **overrides)
    return LLMClient(config, seed=0, sleep=sleep or RecordingSleep())


async def complete_once(client: LLMClient, messages=MESSAGES):
    try:
        return await client.complete(messages)
    finally:
        await client.close()


async def check_once(client: LLMClient) -> None:
    try:
        await client.check()
    finally:
        await client.close()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- replies ------------------------------------------------------------------------------------


def test_reply_has_text_tokens_and_cost():
    step = {"reply": "def kernel(): pass", "prompt_tokens": 1000, "completion_tokens": 500}
    with ScriptedServer([step]) as s:
        c = asyncio.run(complete_once(make_client(s.url)))
    assert c.text == "def kernel(): pass" and c.model == "coder"
    assert (c.prompt_tokens, c.completion_tokens, c.attempts) == (1000, 500, 1)
    assert c.cost == pytest.approx(1000 * 2.0 / 1e6 + 500 * 8.0 / 1e6)
    assert c.finish_reason == "stop" and c.latency_s > 0


def test_request_carries_sampling_parameters_and_model():
    with ScriptedServer([{"reply": "a"}, {"reply": "b"}]) as s:

        async def both():
            client = make_client(s.url)
            await client.complete(MESSAGES)
            tuned = ModelSpec(name="tuned", temperature=0.2, top_p=0.5, max_tokens=64)
            await client.complete(MESSAGES, model=tuned)
            await client.close()

        asyncio.run(both())
        first, second = s.requests
    assert first["model"] == "coder" and first["messages"] == MESSAGES
    assert (first["temperature"], first["top_p"]) == (0.6, 0.95) and "max_tokens" not in first
    assert (second["model"], second["temperature"], second["top_p"], second["max_tokens"]) == ("tuned", 0.2, 0.5, 64)


def test_word_count_tokens_and_empty_content():
    with ScriptedServer([{"reply": "one two three"}, {"reply": None}]) as s:

        async def both():
            client = make_client(s.url)
            a = await client.complete(MESSAGES)
            b = await client.complete(MESSAGES)
            await client.close()
            return a, b

        a, b = asyncio.run(both())
    assert (a.prompt_tokens, a.completion_tokens) == (6, 3)
    assert b.text == "" and b.completion_tokens == 0


# -- retries ------------------------------------------------------------------------------------


def test_server_error_then_reply_succeeds_on_second_attempt():
    sleep = RecordingSleep()
    with ScriptedServer([{"status": 500}, {"reply": "ok"}]) as s:
        c = asyncio.run(complete_once(make_client(s.url, sleep)))
        assert len(s.requests) == 2
    assert c.text == "ok" and c.attempts == 2
    assert len(sleep.waits) == 1 and 0.5 <= sleep.waits[0] <= 1.0  # backoff_base * U(0.5, 1)


def test_backoff_grows_and_is_capped():
    sleep = RecordingSleep()
    with ScriptedServer([{"status": 503}] * 5 + [{"reply": "ok"}]) as s:
        c = asyncio.run(complete_once(make_client(s.url, sleep, backoff_base=1.0, backoff_max=4.0)))
    assert c.attempts == 6
    ceilings = [1.0, 2.0, 4.0, 4.0, 4.0]
    assert all(0.5 * m <= w <= m for w, m in zip(sleep.waits, ceilings, strict=True))


def test_rate_limit_retry_after_is_honoured():
    sleep = RecordingSleep()
    with ScriptedServer([{"status": 429, "retry_after": 7}, {"reply": "ok"}]) as s:
        c = asyncio.run(complete_once(make_client(s.url, sleep)))
    assert c.attempts == 2 and sleep.waits and sleep.waits[0] >= 7


def test_dropped_connection_is_retried():
    sleep = RecordingSleep()
    with ScriptedServer([{"drop": True}, {"reply": "ok"}]) as s:
        c = asyncio.run(complete_once(make_client(s.url, sleep)))
    assert c.text == "ok" and c.attempts == 2 and len(sleep.waits) == 1


def test_slow_reply_times_out_then_fast_reply_succeeds():
    with ScriptedServer([{"delay": 1.5, "reply": "slow"}, {"reply": "fast"}]) as s:
        started = time.perf_counter()
        c = asyncio.run(complete_once(make_client(s.url, timeout=0.3)))
        elapsed = time.perf_counter() - started
    assert c.text == "fast" and c.attempts == 2 and elapsed < 1.4


def test_exhausted_retries_raise_unavailable_in_one_line():
    sleep = RecordingSleep()
    with ScriptedServer(default={"status": 502}) as s:
        with pytest.raises(LLMUnavailable) as info:
            asyncio.run(complete_once(make_client(s.url, sleep, max_retries=3)))
        assert len(s.requests) == 4
    message = str(info.value)
    assert "\n" not in message and s.url in message and "HTTP 502" in message
    assert len(sleep.waits) == 3 and isinstance(info.value, UserError)


def test_unreachable_endpoint_raises_unavailable_naming_it():
    url = f"http://127.0.0.1:{closed_port()}/v1"
    with pytest.raises(LLMUnavailable, match="127.0.0.1") as info:
        asyncio.run(complete_once(make_client(url, max_retries=2)))
    assert "\n" not in str(info.value) and "3 attempts" in str(info.value)


# -- errors that are not retried ----------------------------------------------------------------


def test_wrong_key_is_auth_error_without_retry(monkeypatch):
    monkeypatch.setenv("KS_TEST_LLM_KEY", "wrong")
    sleep = RecordingSleep()
    with ScriptedServer([{"reply": "never"}], api_key="right") as s:
        with pytest.raises(LLMAuthError, match="refused the API key \\(HTTP 401\\)"):
            asyncio.run(complete_once(make_client(s.url, sleep, api_key_env="KS_TEST_LLM_KEY")))
        assert len(s.requests) == 1 and sleep.waits == []
        with pytest.raises(LLMAuthError):
            asyncio.run(check_once(make_client(s.url, api_key_env="KS_TEST_LLM_KEY")))
        monkeypatch.setenv("KS_TEST_LLM_KEY", "right")  # the step was not consumed by the 401
        right = make_client(s.url, api_key_env="KS_TEST_LLM_KEY")
        assert asyncio.run(complete_once(right)).text == "never"


def test_unknown_model_is_request_error_without_retry():
    sleep = RecordingSleep()
    with ScriptedServer([{"status": 404}, {"reply": "unused"}]) as s:
        with pytest.raises(LLMRequestError, match="'coder'.*HTTP 404.*does not exist"):
            asyncio.run(complete_once(make_client(s.url, sleep)))
        assert len(s.requests) == 1 and sleep.waits == []


def test_answer_that_is_not_a_chat_completion_is_request_error():
    with ScriptedServer([{"body": "<html>welcome</html>"}]) as s:
        with pytest.raises(LLMRequestError, match="did not answer .* with a chat completion"):
            asyncio.run(complete_once(make_client(s.url)))


# -- preflight ----------------------------------------------------------------------------------


def test_check_against_closed_port_fails_fast():
    url = f"http://127.0.0.1:{closed_port()}/v1"
    started = time.perf_counter()
    with pytest.raises(LLMUnavailable, match=f"cannot reach the LLM endpoint at {url}"):
        asyncio.run(check_once(make_client(url)))
    assert time.perf_counter() - started < 5


def test_check_without_an_endpoint_says_none_is_configured_and_how_to_give_one():
    default = LLMConfig().base_url
    host, port = default.split("//")[1].split("/")[0].split(":")
    with socket.socket() as s:
        if s.connect_ex((host, int(port))) == 0:
            pytest.skip(f"something listens at the default endpoint {default} here")
    unset = LLMClient(LLMConfig(models=[ModelSpec(name="m")]))
    with pytest.raises(LLMUnavailable) as exc:
        asyncio.run(check_once(unset))
    assert str(exc.value) == (
        f"no LLM endpoint is configured (nothing answers at the default, {default}): give "
        "--llm-base-url URL --model NAME, or base_url and models under [llm] in a --config file "
        "(a value may be ${ENV_VAR}); --mutator tune --seed FILE searches without an LLM"
    )
    # the same URL, given by the user (config or per model), is named as theirs
    for given in (LLMConfig(base_url=default), LLMConfig(models=[ModelSpec(name="m", base_url=default)])):
        with pytest.raises(LLMUnavailable, match=f"cannot reach the LLM endpoint at {default}"):
            asyncio.run(check_once(LLMClient(given)))


def test_check_passes_on_live_server_and_on_missing_models_route():
    with ScriptedServer() as s:
        asyncio.run(check_once(make_client(s.url)))
        asyncio.run(check_once(make_client(s.url + "/no-models-here")))  # 404 on /models is fine
        assert s.requests == []  # the check sends no chat request


# -- model choice, concurrency, accounting ------------------------------------------------------


def test_pick_model_is_deterministic_and_follows_weights():
    models = [ModelSpec(name="big", weight=3.0), ModelSpec(name="small", weight=1.0)]
    client = LLMClient(LLMConfig(models=models))
    picks = [client.pick_model(random.Random(5)).name for _ in range(3)]
    assert len(set(picks)) == 1
    rng_a, rng_b = random.Random(11), random.Random(11)
    seq_a = [client.pick_model(rng_a).name for _ in range(4000)]
    assert seq_a == [client.pick_model(rng_b).name for _ in range(4000)]
    assert 0.70 < seq_a.count("big") / len(seq_a) < 0.80


def test_concurrency_is_bounded():
    lock = threading.Lock()
    in_flight, peak = [0], [0]

    def responder(request: dict) -> dict:
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        time.sleep(0.05)
        with lock:
            in_flight[0] -= 1
        return {"reply": "ok"}

    async def many(client: LLMClient):
        try:
            return await asyncio.gather(*(client.complete(MESSAGES) for _ in range(12)))
        finally:
            await client.close()

    with ScriptedServer(responder=responder) as s:
        results = asyncio.run(many(make_client(s.url, concurrency=3)))
        assert len(s.requests) == 12
    assert len(results) == 12 and peak[0] == 3


def test_usage_totals_add_up_and_missing_usage_counts_zero():
    script = [
        {"reply": "a", "prompt_tokens": 100, "completion_tokens": 10},
        {"reply": "b", "usage": False},
        {"reply": "c", "prompt_tokens": 50, "completion_tokens": 5},
    ]
    with ScriptedServer(script) as s:

        async def three():
            client = make_client(s.url)
            out = [await client.complete(MESSAGES) for _ in range(3)]
            await client.close()
            return client, out

        client, out = asyncio.run(three())
    assert (out[1].prompt_tokens, out[1].completion_tokens, out[1].text) == (0, 0, "b")
    u = client.usage
    assert (u.requests, u.prompt_tokens, u.completion_tokens) == (3, 150, 15)
    assert u.cost == pytest.approx(sum(c.cost for c in out))
    assert u.cost == pytest.approx(150 * 2e-6 + 15 * 8e-6)


# -- configuration and keys ---------------------------------------------------------------------


def test_config_rejects_typos_and_bad_values():
    with pytest.raises(ValidationError, match="extra"):
        LLMConfig(temprature=0.2)
    with pytest.raises(ValidationError):
        LLMConfig(models=[])
    with pytest.raises(ValidationError):
        ModelSpec(name="m", weight=0)


def test_api_key_precedence(tmp_path, monkeypatch):
    monkeypatch.delenv("KS_A", raising=False)
    monkeypatch.delenv("KS_B", raising=False)
    spec = ModelSpec(name="m", api_key_env="KS_A")
    config = LLMConfig(api_key_env="KS_B")
    assert resolve_api_key(config, spec) == "EMPTY"
    monkeypatch.setenv("KS_B", "from-config-env")
    assert resolve_api_key(config, spec) == "from-config-env"
    monkeypatch.setenv("KS_A", "from-spec-env")
    assert resolve_api_key(config, spec) == "from-spec-env"
    key_file = tmp_path / "key"
    key_file.write_text("  from-file\n")
    with_file = config.model_copy(update={"api_key_file": str(key_file)})
    assert resolve_api_key(with_file, spec) == "from-file"
    missing = config.model_copy(update={"api_key_file": str(tmp_path / "nope")})
    with pytest.raises(LLMError, match="api_key_file .*nope does not exist"):
        resolve_api_key(missing, spec)
    with pytest.raises(LLMError, match="does not exist"):
        LLMClient(missing.model_copy(update={"models": [spec]}))


# -- the server as a command --------------------------------------------------------------------


def test_scripted_server_command_prints_url_and_serves(tmp_path):
    script = tmp_path / "script.json"
    steps = {"steps": [{"reply": "from the script"}], "default": {"status": 503}}
    script.write_text(json.dumps(steps))
    proc = subprocess.Popen(
        [sys.executable, "-m", "kernelsmith.llm.scripted_server", "--script", str(script)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    with proc:
        try:
            url = proc.stdout.readline().strip()
            assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
            assert asyncio.run(complete_once(make_client(url))).text == "from the script"
            with pytest.raises(LLMUnavailable, match="HTTP 503"):
                asyncio.run(complete_once(make_client(url, max_retries=1)))
        finally:
            proc.terminate()
            assert proc.wait(timeout=10) == 0  # SIGTERM is a clean stop


def test_scripted_server_command_rejects_a_bad_script(tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"steps": [{"replly": "typo"}]}))
    proc = subprocess.run(
        [sys.executable, "-m", "kernelsmith.llm.scripted_server", "--script", str(script)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2 and "unknown step key" in proc.stderr
    assert "Traceback" not in proc.stderr
