"""`kernelsmith serve`: the evaluation service on HTTP."""

from __future__ import annotations

import math
import sys
from enum import Enum

import typer

from kernelsmith.cli.common import fail, size_flag
from kernelsmith.device import Device


class ServeBackend(str, Enum):
    local = "local"
    ray = "ray"


def serve_cmd(
    host: str = typer.Option("127.0.0.1", help="address to listen on (0.0.0.0: every interface; set a token then)"),
    port: int = typer.Option(
        8765, min=0, max=65535, help="port (0: any free port; the line printed at start says which)"
    ),
    backend: ServeBackend = typer.Option(
        ServeBackend.local, help="local: judge processes here; ray: Ray actors, one per GPU"
    ),
    device: Device = typer.Option(Device.cuda, help="cuda, or cpu (Triton interpreter)"),
    workers: int | None = typer.Option(None, min=1, help="evaluation workers \\[default: one per GPU; 1 on the CPU]"),
    ray_address: str | None = typer.Option(
        None, help="Ray cluster to join (e.g. auto, ray://head:10001) \\[default: start one here]"
    ),
    token_env: str | None = typer.Option(
        None, help="require 'Authorization: Bearer T', T read from this environment variable"
    ),
    max_queue: int = typer.Option(64, min=1, help="evaluations admitted at once (running and waiting); beyond: 429"),
    cache_size: int = typer.Option(4096, min=0, help="verdicts kept in memory by (task, candidate, options); 0: none"),
    max_body: str = typer.Option("4M", help="largest request body, e.g. 4M"),
    max_timeout: float = typer.Option(
        900.0, min=1, help="largest per-candidate timeout a request may ask for, seconds"
    ),
) -> None:
    """Serve evaluations over HTTP: POST /v1/evaluate, GET /v1/health; OpenAPI at /openapi.json."""
    from kernelsmith.evaluate.backends import BackendConfig
    from kernelsmith.serve.server import serve

    if ray_address is not None and backend is not ServeBackend.ray:
        fail("--ray-address needs --backend ray")
    if not math.isfinite(max_timeout):
        fail(f"--max-timeout: {max_timeout} is not a number of seconds")
    try:
        cfg = BackendConfig(kind=backend.value, ray_address=ray_address)
        serve(
            host,
            port,
            cfg,
            device.value,
            workers,
            token_env=token_env,
            max_queue=max_queue,
            cache_size=cache_size,
            max_body_bytes=size_flag(max_body, "--max-body", minimum=16 * 2**10),
            max_timeout=max_timeout,
            say=lambda text: print(text, flush=True),
        )
    except KeyboardInterrupt:
        pass
    sys.stdout.flush()
