"""An async client for OpenAI-compatible chat endpoints: retries, bounded concurrency, cost.

The openai library's own retries are turned off so that one tenacity policy decides what is
retried (429, 5xx, timeouts, dropped connections), how long to wait (exponential backoff with
jitter from a seeded RNG, or the server's Retry-After), and what a failure looks like to a user
(one line naming the endpoint and the last error).
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import openai
import tenacity
from openai.types.chat import ChatCompletion

from kernelsmith.errors import UserError
from kernelsmith.llm.config import LLMConfig, ModelSpec
from kernelsmith.retry import failure, parse_retry_after

# The preflight check should fail fast even when a request may take minutes.
_CHECK_TIMEOUT_S = 30.0
_DETAIL_CHARS = 300


class LLMError(UserError):
    """A failure talking to the LLM; its str is one line a CLI can print as is."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(str(message).split()))


class LLMAuthError(LLMError):
    """The endpoint refused the API key (HTTP 401/403)."""


class LLMUnavailable(LLMError):
    """The endpoint cannot be reached, or kept failing until the retries ran out."""


class LLMRequestError(LLMError):
    """The endpoint rejected the request itself (bad model name, bad parameters); not retried."""


@dataclass
class Completion:
    """One chat answer and what it cost; latency_s is the answering request's own time."""

    model: str
    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    cost: float
    attempts: int
    finish_reason: str | None


@dataclass
class Usage:
    """Running totals over the completions a client has returned."""

    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0

    def add(self, completion: Completion) -> None:
        self.requests += 1
        self.prompt_tokens += completion.prompt_tokens
        self.completion_tokens += completion.completion_tokens
        self.cost += completion.cost


def resolve_api_key(config: LLMConfig, spec: ModelSpec) -> str:
    """The key for `spec`: api_key_file > spec.api_key_env > config.api_key_env > "EMPTY".

    Local servers (vLLM, Ollama) need no key, so an absent one is the placeholder "EMPTY".
    """
    if config.api_key_file is not None:
        path = Path(config.api_key_file).expanduser()
        if not path.is_file():
            raise LLMError(f"api_key_file {path} does not exist")
        try:
            key = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise LLMError(f"cannot read api_key_file {path}: {exc}") from None
        if not key:
            raise LLMError(f"api_key_file {path} is empty")
        return key
    for var in (spec.api_key_env, config.api_key_env):
        if var and os.environ.get(var, "").strip():
            return os.environ[var].strip()
    return "EMPTY"


def _short(text: object) -> str:
    one = " ".join(str(text).split())
    return one if len(one) <= _DETAIL_CHARS else one[: _DETAIL_CHARS - 3] + "..."


def _status_detail(exc: openai.APIStatusError) -> str:
    """'HTTP 500: message' from the error body, falling back to the library's message."""
    body = exc.body
    message = body.get("message") if isinstance(body, dict) else body
    return f"HTTP {exc.status_code}: {_short(message or exc.message)}"


def _connection_detail(exc: openai.APIConnectionError, timeout: float) -> str:
    if isinstance(exc, openai.APITimeoutError):
        return f"no answer within {timeout:g} s"
    cause = exc.__cause__
    if cause is None:
        return _short(exc.message)
    return _short(f"{type(cause).__name__}: {cause}" if str(cause) else type(cause).__name__)


def _not_a_completion(url: str, spec: ModelSpec, answer: object) -> LLMRequestError:
    return LLMRequestError(
        f"the LLM endpoint at {url} did not answer model {spec.name!r} with a chat completion "
        f"(got {_short(answer)[:120]!r}); is the base_url right?"
    )


def _retryable(exc: BaseException) -> bool:
    """429, 408 (a server-side timeout), 5xx, timeouts and dropped connections are worth another try;
    401/403 and the other 4xx (the request itself is wrong) are not."""
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in (408, 429) or exc.status_code >= 500
    return isinstance(exc, openai.APIConnectionError)  # includes timeouts


def _retry_after(exc: openai.APIStatusError) -> float | None:
    """Seconds the server asked us to wait (Retry-After-Ms, else Retry-After), if it said."""
    headers = exc.response.headers
    wait = parse_retry_after(headers.get("retry-after-ms"), unit=1e-3)
    return wait if wait is not None else parse_retry_after(headers.get("retry-after"))


class LLMClient:
    """Sends chat requests to the configured models. Create and use it inside one event loop."""

    def __init__(
        self,
        config: LLMConfig,
        seed: int = 0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.config = config
        self.usage = Usage()
        self._sleep = sleep
        # Separate streams: the models picked do not depend on how many retries happened.
        self._model_rng = random.Random(seed)
        self._jitter_rng = random.Random(f"{seed}:jitter")
        self._semaphore = asyncio.Semaphore(config.concurrency)
        self._clients: dict[tuple[str, str], openai.AsyncOpenAI] = {}
        self._routes: dict[ModelSpec, tuple[str, openai.AsyncOpenAI]] = {}
        for spec in config.models:  # resolve keys now: a missing key file fails at start
            self._route(spec)

    def _route(self, spec: ModelSpec) -> tuple[str, openai.AsyncOpenAI]:
        """The (base_url, openai client) for a spec; one client per distinct url and key."""
        if spec not in self._routes:
            url = (spec.base_url or self.config.base_url).rstrip("/")
            key = resolve_api_key(self.config, spec)
            if (url, key) not in self._clients:
                self._clients[(url, key)] = openai.AsyncOpenAI(
                    base_url=url, api_key=key, max_retries=0, timeout=self.config.timeout
                )
            self._routes[spec] = (url, self._clients[(url, key)])
        return self._routes[spec]

    def pick_model(self, rng: random.Random) -> ModelSpec:
        """A model drawn in proportion to the weights; the same rng state gives the same pick."""
        models = self.config.models
        return rng.choices(models, weights=[m.weight for m in models], k=1)[0]

    def _backoff(self, retry: int) -> float:
        """Exponential backoff with jitter: retry 0 waits about backoff_base, then doubles."""
        cfg = self.config
        ceiling = min(cfg.backoff_max, cfg.backoff_base * 2.0 ** min(retry, 60))
        return ceiling * self._jitter_rng.uniform(0.5, 1.0)

    def _wait(self, retry_state: tenacity.RetryCallState) -> float:
        """The server's Retry-After if it gave one, else the backoff for this retry."""
        exc = failure(retry_state)
        if isinstance(exc, openai.APIStatusError) and (wait := _retry_after(exc)) is not None:
            return wait
        if retry_state.attempt_number > self.config.max_retries:
            # tenacity asks for the wait before it sees the attempts are spent: no sleep follows,
            # so draw no jitter (the stream must not depend on a give-up).
            return 0.0
        return self._backoff(retry_state.attempt_number - 1)

    def _retrying(self) -> tenacity.AsyncRetrying:
        """The retry policy of one request: max_retries more tries of the retryable failures."""
        return tenacity.AsyncRetrying(
            retry=tenacity.retry_if_exception(_retryable),
            stop=tenacity.stop_after_attempt(self.config.max_retries + 1),
            wait=self._wait,
            sleep=self._sleep,
            reraise=True,
        )

    async def complete(self, messages: list[dict], model: ModelSpec | None = None) -> Completion:
        """One chat completion, retried on 429/5xx/timeouts/dropped connections."""
        spec = model if model is not None else self.pick_model(self._model_rng)
        url, client = self._route(spec)
        cfg = self.config
        params: dict = {
            "model": spec.name,
            "messages": messages,
            "temperature": spec.temperature if spec.temperature is not None else cfg.temperature,
            "top_p": spec.top_p if spec.top_p is not None else cfg.top_p,
        }
        max_tokens = spec.max_tokens if spec.max_tokens is not None else cfg.max_tokens
        if max_tokens is not None:
            params["max_tokens"] = max_tokens

        attempts = 0

        async def attempt() -> tuple[object, float]:
            nonlocal attempts
            attempts += 1
            async with self._semaphore:  # held for the request, not for the waits between tries
                started = time.perf_counter()
                response = await client.chat.completions.create(**params)
                return response, time.perf_counter() - started

        def gave_up(last_error: str) -> LLMUnavailable:
            return LLMUnavailable(
                f"gave up on the LLM endpoint at {url} (model {spec.name!r}) after "
                f"{attempts} attempts; last error: {last_error}"
            )

        try:
            response, latency = await self._retrying()(attempt)
        except openai.APIStatusError as exc:
            status = exc.status_code
            if _retryable(exc):
                raise gave_up(_status_detail(exc)) from None
            if status in (401, 403):
                raise LLMAuthError(f"the LLM endpoint at {url} refused the API key (HTTP {status})") from None
            raise LLMRequestError(
                f"the LLM endpoint at {url} rejected the request for model {spec.name!r} ({_status_detail(exc)})"
            ) from None
        except openai.APIConnectionError as exc:  # includes timeouts
            raise gave_up(_connection_detail(exc, cfg.timeout)) from None
        except openai.APIResponseValidationError as exc:
            raise _not_a_completion(url, spec, exc.body) from None

        # A URL that is not a chat endpoint (an HTML page, a proxy) can still answer 200.
        if not isinstance(response, ChatCompletion) or not isinstance(getattr(response, "choices", None), list):
            raise _not_a_completion(url, spec, response)
        return self._completion(spec, response, latency, attempts)

    def _completion(self, spec: ModelSpec, response: ChatCompletion, latency: float, attempts: int) -> Completion:
        """Turn an openai ChatCompletion into our record and add it to the usage totals.

        Servers differ in what they leave out: no usage counts as 0 tokens, no content as "".
        """
        choice = response.choices[0] if response.choices else None
        message = getattr(choice, "message", None)
        text = getattr(message, "content", None) or ""
        usage = getattr(response, "usage", None)
        prompt = (getattr(usage, "prompt_tokens", 0) or 0) if usage is not None else 0
        completion_tokens = (getattr(usage, "completion_tokens", 0) or 0) if usage is not None else 0
        result = Completion(
            model=spec.name,
            text=text,
            prompt_tokens=prompt,
            completion_tokens=completion_tokens,
            latency_s=latency,
            cost=prompt * spec.price_in / 1e6 + completion_tokens * spec.price_out / 1e6,
            attempts=attempts,
            finish_reason=getattr(choice, "finish_reason", None),
        )
        self.usage.add(result)
        return result

    async def check(self) -> None:
        """Preflight: list the models of each endpoint, to fail early on a bad URL or key.

        A 404 is fine (some servers have no /models); any answer but 401/403/5xx passes.
        """
        seen: set[int] = set()
        for spec in self.config.models:
            url, client = self._route(spec)
            if id(client) in seen:
                continue
            seen.add(id(client))
            timeout = min(self.config.timeout, _CHECK_TIMEOUT_S)
            try:
                await client.models.list(timeout=timeout)
            except openai.APIStatusError as exc:
                if exc.status_code in (401, 403):
                    raise LLMAuthError(
                        f"the LLM endpoint at {url} refused the API key (HTTP {exc.status_code})"
                    ) from None
                if exc.status_code >= 500:
                    raise LLMUnavailable(f"the LLM endpoint at {url} is failing ({_status_detail(exc)})") from None
            except openai.APIConnectionError as exc:
                if not self.config.endpoint_given(spec):  # the user never typed this URL: say what to give
                    raise LLMUnavailable(
                        f"no LLM endpoint is configured (nothing answers at the default, {url}): give "
                        "--llm-base-url URL --model NAME, or base_url and models under [llm] in a --config "
                        "file (a value may be ${ENV_VAR}); --mutator tune --seed FILE searches without an LLM"
                    ) from None
                raise LLMUnavailable(
                    f"cannot reach the LLM endpoint at {url}: {_connection_detail(exc, timeout)}"
                ) from None

    async def close(self) -> None:
        """Close the HTTP connection pools."""
        for client in self._clients.values():
            await client.close()

    async def __aenter__(self) -> LLMClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
