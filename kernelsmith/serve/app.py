"""The HTTP face of the evaluation service (FastAPI): /v1/evaluate, /v1/health, /v1/hardware.

    POST /v1/evaluate  {"task_source": "...", "candidate_source": "...", "trials": 5, ...}
        200: the verdict, the same record as `kernelsmith eval --json`
             (header X-Kernelsmith-Cache: hit | joined | miss)
        401: a token is configured and the request lacks it
        413: the body is larger than the limit
        422: a malformed request, or a task file that cannot be loaded
        429: the queue is full (header Retry-After, in seconds)
"""

from __future__ import annotations

import hmac
import json

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import ConfigDict, Field, field_validator

from kernelsmith.errors import TaskError
from kernelsmith.evaluate.options import EvalOptions
from kernelsmith.evaluate.result import EvalResult
from kernelsmith.serve.service import EvalService, QueueFull
from kernelsmith.task import Task

API_VERSION = "1"


class EvaluateRequest(EvalOptions):
    """A task and a candidate as text, and the evaluation options (each defaults as in
    `kernelsmith eval`)."""

    model_config = ConfigDict(extra="forbid")

    task_source: str = Field(min_length=1, description="the KernelBench-format task file's text")
    candidate_source: str = Field(min_length=1, description="the candidate file's text (defines ModelNew)")
    task_name: str = Field("task", max_length=200, description="a name for messages")
    device: str | None = Field(None, description="cuda or cpu; must be the service's device (default)")

    @field_validator("device")
    @classmethod
    def _device(cls, v: str | None) -> str | None:
        if v not in (None, "cuda", "cpu"):
            raise ValueError("device must be 'cuda' or 'cpu'")
        return v

    def options(self, device: str) -> EvalOptions:
        fields = self.model_dump(exclude={"task_source", "candidate_source", "task_name", "device"})
        return EvalOptions(device=device, **fields)


def _error(status: int, detail: str, headers: dict | None = None) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status, headers=headers)


class _TooLarge(HTTPException):
    """An HTTPException, so that FastAPI's body parsing passes it on instead of answering 400."""

    def __init__(self, max_bytes: int):
        super().__init__(413, f"request body over {max_bytes} bytes")


class BodyLimit:
    """ASGI middleware: refuse a request body over `max_bytes` with 413, whether or not the
    client announced its length."""

    def __init__(self, app, max_bytes: int):
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            return await self._refuse(send)
        seen = 0

        async def limited():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise _TooLarge(self.max_bytes)
            return message

        try:
            await self.app(scope, limited, send)
        except _TooLarge:
            await self._refuse(send)

    async def _refuse(self, send):
        body = json.dumps({"detail": f"request body over {self.max_bytes} bytes"}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


def create_app(service: EvalService, token: str | None = None, max_body_bytes: int = 4 * 2**20) -> FastAPI:
    app = FastAPI(title="kernelsmith evaluation service", version=API_VERSION,
                  description="Compile, check and time a candidate kernel against its PyTorch reference.")

    def authorized(request: Request) -> None:
        if token is None:
            return
        given = request.headers.get("authorization", "")
        scheme, _, value = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(), token.encode()):
            raise _Unauthorized

    @app.exception_handler(_Unauthorized)
    async def _unauthorized(request, exc):
        return _error(401, "missing or wrong bearer token", {"WWW-Authenticate": "Bearer"})

    @app.get("/v1/health", summary="Liveness, queue and cache counters (no token needed)")
    async def health() -> dict:
        return service.health()

    @app.get("/v1/hardware", summary="The GPU as the workers see it: name, SMs, measured ceilings",
             dependencies=[Depends(authorized)])
    async def hardware() -> dict:
        return await service.hardware()

    @app.post("/v1/evaluate", response_model=EvalResult, dependencies=[Depends(authorized)],
              summary="Evaluate one candidate against one task",
              responses={413: {"description": "body too large"}, 422: {"description": "bad request or task"},
                         429: {"description": "queue full; see Retry-After"}})
    async def evaluate(req: EvaluateRequest):
        if req.device is not None and req.device != service.device:
            return _error(422, f"this service evaluates on {service.device}, not {req.device}")
        if req.timeout > service.max_timeout:
            return _error(422, f"timeout {req.timeout:g} s is over this service's limit of {service.max_timeout:g} s")
        try:
            task = Task.from_source(req.task_source, name=req.task_name)
            record, how = await service.evaluate(task, req.candidate_source, req.options(service.device))
        except TaskError as exc:
            return _error(422, str(exc))
        except QueueFull as exc:
            return _error(429, str(exc), {"Retry-After": str(exc.retry_after)})
        return JSONResponse(record, headers={"X-Kernelsmith-Cache": how})

    app.add_middleware(BodyLimit, max_bytes=max_body_bytes)
    return app


class _Unauthorized(Exception):
    pass
