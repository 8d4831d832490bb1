"""The HTTP face of the evaluation service (FastAPI): /v1/evaluate, /v1/health, /v1/hardware.

POST /v1/evaluate  {"task_source": "...", "candidate_source": "...", "trials": 5, ...}
    200: the verdict, the same record as `kernelsmith eval --json`
         (header X-Kernelsmith-Cache: hit | joined | miss)
    401: a token is configured and the request lacks it (checked before the body is read)
    408: the body did not arrive within BODY_TIMEOUT seconds
    413: the body is larger than the limit
    422: a malformed request (the fields and short excerpts, never the body), or a task
         file that cannot be loaded
    429: the queue is full (header Retry-After, in seconds)
"""

from __future__ import annotations

import asyncio
import hmac
import json
import math
import time
from collections.abc import Sequence

from fastapi import FastAPI, HTTPException
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ConfigDict, Field, field_validator

from kernelsmith.errors import TaskError
from kernelsmith.evaluate.counters import DEFAULT_TIMEOUT
from kernelsmith.evaluate.options import EvalOptions
from kernelsmith.evaluate.result import EvalResult
from kernelsmith.serve.service import EvalService, QueueFull
from kernelsmith.task import Task

API_VERSION = "1"
# Seconds from a request's headers to the end of its body: a client that sends part of a body and
# waits (or trickles it) would otherwise hold its connection and task indefinitely. 4 MiB in 5 s
# needs about 7 Mbit/s; requests are source text, usually a few kB.
BODY_TIMEOUT = 5.0
# Paths open without the token (liveness and the API's description); every other path needs it.
PUBLIC_PATHS = frozenset({"/v1/health", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})
# A 422 names fields and quotes short excerpts: echoing the input would send a 4 MB body back.
EXCERPT_CHARS = 100
MAX_ERROR_BYTES = 4096


class EvaluateRequest(EvalOptions):
    """A task and a candidate as text, and the evaluation options (each defaults as in
    `kernelsmith eval`)."""

    model_config = ConfigDict(extra="forbid")

    task_source: str = Field(min_length=1, description="the KernelBench-format task file's text")
    candidate_source: str = Field(min_length=1, description="the candidate file's text (defines ModelNew)")
    task_name: str = Field(default="task", max_length=200, description="a name for messages")
    device: str | None = Field(default=None, description="cuda or cpu; must be the service's device (default)")
    profile: bool = Field(default=False, description="a correct candidate's verdict gets Nsight Compute's counters")
    profile_timeout: float = Field(default=DEFAULT_TIMEOUT, gt=0, le=600, allow_inf_nan=False)

    @field_validator("task_source", "candidate_source")
    @classmethod
    def _without_bom(cls, v: str) -> str:
        # A file read with its byte-order mark: Python drops it when it runs the file, so do we.
        return v.removeprefix("\ufeff")

    @field_validator("device")
    @classmethod
    def _device(cls, v: str | None) -> str | None:
        if v not in (None, "cuda", "cpu"):
            raise ValueError("device must be 'cuda' or 'cpu'")
        return v

    def options(self, device: str) -> EvalOptions:
        fields = self.model_dump(
            exclude={"task_source", "candidate_source", "task_name", "device", "profile", "profile_timeout"}
        )
        return EvalOptions(device=device, **fields)


def _error(status: int, detail: str, headers: dict | None = None) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status, headers=headers)


def _excerpt(text: str) -> str:
    return text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS] + "..."


def _short_error(error: dict) -> dict:
    """One validation error as field names, the message and a short excerpt of a scalar input
    (a missing field's input is the whole body: left out)."""
    out = {
        "type": error.get("type"),
        "loc": [_excerpt(part) if isinstance(part, str) else part for part in error.get("loc", ())[:6]],
        "msg": _excerpt(str(error.get("msg", ""))),
    }
    value = error.get("input")
    if isinstance(value, str):
        out["input"] = _excerpt(value)
    elif isinstance(value, float) and not math.isfinite(value):
        out["input"] = str(value)  # NaN and Infinity are not JSON: echoed as text
    elif isinstance(value, (bool, int, float)) or value is None:
        out["input"] = value if len(str(value)) <= EXCERPT_CHARS else _excerpt(str(value))
    return out


def validation_detail(errors: list[dict]) -> dict:
    """The 422 body: as many short errors as fit in MAX_ERROR_BYTES (the first always does), and
    how many were left out."""
    detail, size = [], 0
    for error in errors:
        short = _short_error(error)
        n = len(json.dumps(short, default=str)) + 2
        if detail and size + n > MAX_ERROR_BYTES:
            break
        detail.append(short)
        size += n
    body: dict = {"detail": detail}
    if len(detail) < len(errors):
        body["omitted"] = len(errors) - len(detail)
    return body


async def _send_json(send, status: int, detail: str, headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *headers],
        }
    )
    await send({"type": "http.response.body", "body": body})


class _TooLarge(HTTPException):
    """An HTTPException, so that FastAPI's body parsing passes it on instead of answering 400."""

    def __init__(self, max_bytes: int):
        super().__init__(413, f"request body over {max_bytes} bytes")


class _TooSlow(HTTPException):
    def __init__(self, seconds: float):
        # close: the rest of the body may still come, and the connection's state is unknown
        super().__init__(408, f"request body not received within {seconds:g} s", headers={"Connection": "close"})


class BodyLimit:
    """ASGI middleware: refuse a request body over `max_bytes` with 413, whether or not the
    client announced its length, and one not complete `timeout` seconds after the headers with 408."""

    def __init__(self, app, max_bytes: int, timeout: float = BODY_TIMEOUT):
        self.app, self.max_bytes, self.timeout = app, max_bytes, timeout

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            return await _send_json(send, 413, f"request body over {self.max_bytes} bytes")
        seen, done, deadline = 0, False, time.monotonic() + self.timeout

        async def limited():
            nonlocal seen, done
            if done:  # after the body: a wait for the disconnect has no deadline
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), max(deadline - time.monotonic(), 0.0))
            except TimeoutError:
                raise _TooSlow(self.timeout) from None
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise _TooLarge(self.max_bytes)
                done = not message.get("more_body", False)
            return message

        try:
            await self.app(scope, limited, send)
        except (_TooLarge, _TooSlow) as exc:
            await _send_json(
                send,
                exc.status_code,
                exc.detail,
                [(k.lower().encode(), v.encode()) for k, v in (exc.headers or {}).items()],
            )


class BearerToken:
    """ASGI middleware: answer 401 to a request for any path but PUBLIC_PATHS without
    `Authorization: Bearer TOKEN`, before its body is read (so a malformed or oversized body
    from a stranger gets 401, not 422 or 413)."""

    def __init__(self, app, token: str):
        self.app, self.token = app, token.encode()

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"] in PUBLIC_PATHS:
            return await self.app(scope, receive, send)
        given = dict(scope.get("headers") or []).get(b"authorization", b"")
        scheme, _, value = given.partition(b" ")
        if scheme.lower() != b"bearer" or not hmac.compare_digest(value.strip(), self.token):
            return await _send_json(send, 401, "missing or wrong bearer token", [(b"www-authenticate", b"Bearer")])
        await self.app(scope, receive, send)


def create_app(
    service: EvalService, token: str | None = None, max_body_bytes: int = 4 * 2**20, body_timeout: float = BODY_TIMEOUT
) -> FastAPI:
    app = FastAPI(
        title="kernelsmith evaluation service",
        version=API_VERSION,
        description="Compile, check and time a candidate kernel against its PyTorch reference.",
    )

    @app.exception_handler(RequestValidationError)
    async def _invalid(request, exc):
        return JSONResponse(validation_detail(exc.errors()), status_code=422)

    @app.get("/v1/health", summary="Liveness, queue and cache counters (no token needed)")
    async def health() -> dict:
        return service.health()

    @app.get("/v1/hardware", summary="The GPU as the workers see it: name, SMs, measured ceilings")
    async def hardware() -> dict:
        return await service.hardware()

    @app.post(
        "/v1/evaluate",
        response_model=EvalResult,
        summary="Evaluate one candidate against one task",
        responses={
            401: {"description": "token missing or wrong"},
            408: {"description": "body too slow"},
            413: {"description": "body too large"},
            422: {"description": "bad request or task"},
            429: {"description": "queue full; see Retry-After"},
        },
    )
    async def evaluate(req: EvaluateRequest):
        if req.device is not None and req.device != service.device:
            return _error(422, f"this service evaluates on {service.device}, not {req.device}")
        if req.timeout > service.max_timeout:
            return _error(422, f"timeout {req.timeout:g} s is over this service's limit of {service.max_timeout:g} s")
        try:
            task = Task.from_source(req.task_source, name=req.task_name)
            record, how = await service.evaluate(task, req.candidate_source, req.options(service.device))
            if req.profile and record.get("correct"):
                counters = await service.profile(task, req.candidate_source, req.profile_timeout)
                record = {**record, "counters": counters}
        except TaskError as exc:
            return _error(422, str(exc))
        except QueueFull as exc:
            return _error(429, str(exc), {"Retry-After": str(exc.retry_after)})
        return JSONResponse(record, headers={"X-Kernelsmith-Cache": how})

    app.add_middleware(BodyLimit, max_bytes=max_body_bytes, timeout=body_timeout)
    if token is not None:  # added last, so outermost: it runs before the body is read
        app.add_middleware(BearerToken, token=token)
    return app
