"""A client of `kernelsmith serve` that is an `EvalBackend`: the search and the GRPO reward use it
by URL, so that proposals and evaluations run on different machines.

Standard library HTTP (one thread per request in flight): an evaluation takes seconds, so a
connection per request costs nothing that matters. The retry policy is tenacity's.
"""

from __future__ import annotations

import http.client
import json
import random
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import tenacity

from kernelsmith.candidate import Candidate
from kernelsmith.errors import UserError
from kernelsmith.evaluate.backends import DEFAULT_TOKEN_ENV
from kernelsmith.evaluate.counters import DEFAULT_TIMEOUT, CountersReport
from kernelsmith.evaluate.options import EvalOptions
from kernelsmith.evaluate.result import EvalResult
from kernelsmith.retry import failure, parse_retry_after
from kernelsmith.task import Task

_DROPPED = (urllib.error.URLError, ConnectionError, TimeoutError, http.client.HTTPException, OSError)
# The service's Retry-After is a queue estimate; a longer one is waited out in steps of this.
_MAX_RETRY_AFTER_S = 60.0


def _full(exc: BaseException | None) -> bool:
    """A full queue (429): not a failure, waited out until the queue deadline."""
    return isinstance(exc, urllib.error.HTTPError) and exc.code == 429


def _retryable(exc: BaseException) -> bool:
    """A full queue, a 5xx or a dropped connection; not 401 or another 4xx (the request is wrong)."""
    if isinstance(exc, urllib.error.HTTPError):
        return exc.code == 429 or exc.code >= 500
    return isinstance(exc, _DROPPED)


def _retry_after_header(exc: BaseException | None) -> str | None:
    return exc.headers.get("Retry-After") if isinstance(exc, urllib.error.HTTPError) and exc.headers else None


class _RetryPolicy:
    """One request's tenacity policy: a full queue (429) is waited out as told (Retry-After, plus
    up to 0.5 s of jitter) until `queue_wait` seconds after the start; a 5xx or a dropped
    connection is a failure, retried after the server's Retry-After or an exponential backoff
    with jitter (0.5 s doubling, at most `backoff_max`), until `attempts` failures."""

    def __init__(
        self, attempts: int, queue_wait: float, backoff_max: float, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        self.attempts, self.backoff_max = attempts, backoff_max
        self.queue_deadline = time.monotonic() + queue_wait
        self.failures = 0
        self.retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(_retryable),
            after=self._count,
            wait=self._wait,
            stop=self._stop,
            sleep=sleep,
            reraise=True,
        )

    def _count(self, retry_state: tenacity.RetryCallState) -> None:
        if not _full(failure(retry_state)):
            self.failures += 1

    def _wait(self, retry_state: tenacity.RetryCallState) -> float:
        exc = failure(retry_state)
        header = _retry_after_header(exc)
        if _full(exc):
            return parse_retry_after(header, 1.0, cap=_MAX_RETRY_AFTER_S) + random.uniform(0, 0.5)
        wait = parse_retry_after(header, cap=_MAX_RETRY_AFTER_S)
        if wait is not None:
            return wait
        return min(self.backoff_max, 0.5 * 2 ** (self.failures - 1)) * random.uniform(0.5, 1.0)

    def _stop(self, retry_state: tenacity.RetryCallState) -> bool:
        if _full(failure(retry_state)):
            return time.monotonic() > self.queue_deadline
        return self.failures >= self.attempts


class RemoteBackend:
    """Evaluate on a service at `url`. Waits out a full queue (429, Retry-After) for up to
    `queue_wait` seconds; retries a dropped connection or a 5xx with backoff, `attempts` times."""

    # Time the service may spend beyond the candidate's own timeout (queueing aside): baselines,
    # torch.compile, a worker restart.
    GRACE = 900.0
    # How the retry policy waits between tries (tests record the waits instead).
    _sleep: Callable[[float], None] = staticmethod(time.sleep)

    def __init__(
        self,
        url: str,
        token: str | None = None,
        options: EvalOptions | None = None,
        concurrency: int = 16,
        attempts: int = 6,
        queue_wait: float = 3600.0,
        backoff_max: float = 30.0,
        token_env: str = DEFAULT_TOKEN_ENV,
    ):
        """`token_env`: the variable `token` was read from, named when the service refuses it."""
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise UserError(f"--eval-url {url!r}: use http://HOST:PORT or https://HOST:PORT")
        self.url = url.rstrip("/")
        self.token, self.token_env, self.options = token, token_env, options or EvalOptions()
        self.attempts, self.queue_wait, self.backoff_max = attempts, queue_wait, backoff_max
        self._executor = ThreadPoolExecutor(concurrency, thread_name_prefix="ks-remote")
        # A proxy from the environment must not see loopback traffic; other hosts honour it.
        loopback = parts.hostname in ("127.0.0.1", "localhost", "::1")
        self._opener = urllib.request.build_opener(*([urllib.request.ProxyHandler({})] if loopback else []))
        info = self.health()  # unreachable or wrong service: one clear line now, not later
        if info.get("device") not in (None, self.options.device):
            raise UserError(
                f"the evaluation service at {self.url} evaluates on {info.get('device')}, not {self.options.device}"
            )
        self.workers = int(info.get("workers") or 1)

    # -- EvalBackend ---------------------------------------------------------------------------
    def submit(self, task: Task, candidate: Candidate | str, options: EvalOptions | None = None) -> Future:
        source = candidate.source if isinstance(candidate, Candidate) else candidate
        opts = (options or self.options).model_copy(update={"device": self.options.device})
        return self._executor.submit(self._evaluate, task, source, opts)

    def hardware(self) -> Future:
        return self._executor.submit(self._request, "GET", "/v1/hardware", None, self.GRACE)

    def profile(self, task: Task, candidate: Candidate | str, timeout: float = DEFAULT_TIMEOUT) -> Future:
        """Future[CountersReport]: the service evaluates with `profile` on (its cached verdict, when
        it has one) and runs the counters stage."""
        source = candidate.source if isinstance(candidate, Candidate) else candidate
        return self._executor.submit(self._profile, task, source, timeout)

    def _profile(self, task: Task, source: str, timeout: float) -> CountersReport:
        body = {"task_source": task.source, "task_name": task.name, "candidate_source": source}
        body |= {**self.options.model_dump(mode="json"), "profile": True, "profile_timeout": timeout}
        try:
            record = self._request("POST", "/v1/evaluate", body, self.options.timeout + timeout + self.GRACE)
        except UserError as exc:
            return CountersReport(status="failed", message=str(exc)[:300])
        counters = record.get("counters")
        if counters is None:
            why = "the service ran no counters stage (the candidate is not correct, or the service predates it)"
            return CountersReport(status="unsupported", message=why)
        return CountersReport.model_validate(counters)

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)

    def evaluate(self, task: Task, candidate: Candidate | str, options: EvalOptions | None = None) -> EvalResult:
        return self.submit(task, candidate, options).result()

    def health(self, attempts: int = 2) -> dict:
        """The service's /v1/health. Few attempts: a wrong URL should fail in about a second."""
        return self._request("GET", "/v1/health", None, 30.0, attempts)

    # -- HTTP ----------------------------------------------------------------------------------
    def _evaluate(self, task: Task, source: str, opts: EvalOptions) -> EvalResult:
        body = {
            "task_source": task.source,
            "task_name": task.name,
            "candidate_source": source,
            **opts.model_dump(mode="json"),
        }
        return EvalResult.model_validate(self._request("POST", "/v1/evaluate", body, opts.timeout + self.GRACE))

    def _request(
        self, method: str, path: str, body: dict | None, read_timeout: float, attempts: int | None = None
    ) -> dict:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        policy = _RetryPolicy(attempts or self.attempts, self.queue_wait, self.backoff_max, self._sleep)

        def attempt() -> dict:
            req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
            with self._opener.open(req, timeout=read_timeout) as resp:
                return json.loads(resp.read())

        def gave_up(reason: str) -> UserError:
            return UserError(
                f"the evaluation service at {self.url} is unreachable or failing after "
                f"{policy.failures} attempts: {reason}"
            )

        try:
            return policy.retrying(attempt)
        except urllib.error.HTTPError as exc:
            detail = _detail(exc)
            if exc.code == 429:
                raise UserError(f"the evaluation service at {self.url} stayed full for {self.queue_wait:g} s") from None
            if exc.code == 401:
                raise UserError(self._refused()) from None
            if exc.code < 500:
                raise UserError(
                    f"the evaluation service at {self.url} refused the request ({exc.code}): {detail}"
                ) from None
            raise gave_up(f"HTTP {exc.code}: {detail}") from None
        except _DROPPED as exc:
            raise gave_up(str(getattr(exc, "reason", None) or exc) or type(exc).__name__) from None

    def _refused(self) -> str:
        """The 401's one line: which variable the token comes from, and whether one was sent."""
        env = f"${self.token_env}"
        if self.token:
            return f"the evaluation service at {self.url} refused the token from {env}: set it to the service's token"
        return (
            f"the evaluation service at {self.url} needs a token and none was sent: {env} is not set or empty "
            "(backend.token_env names the variable to read)"
        )


def _detail(exc: urllib.error.HTTPError) -> str:
    try:
        payload = json.loads(exc.read() or b"{}")
    except (ValueError, OSError):
        return exc.reason or ""
    detail = payload.get("detail") if isinstance(payload, dict) else None
    if isinstance(detail, list):  # FastAPI's validation errors
        return "; ".join(f"{'.'.join(str(x) for x in d.get('loc', [])[1:])}: {d.get('msg')}" for d in detail)
    return str(detail or exc.reason or "")
