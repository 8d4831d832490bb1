"""Run the service: open the backend, bind the socket, serve with uvicorn until SIGINT/SIGTERM."""

from __future__ import annotations

import socket
from collections.abc import Callable

from kernelsmith.errors import UserError
from kernelsmith.evaluate.backends import BackendConfig, open_backend, read_token
from kernelsmith.evaluate.options import EvalOptions


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(2048)
    return sock


def containment_warning(host: str, device: str) -> str | None:
    """A loud line when the service takes candidates from beyond this machine and their sandboxes
    do not hold all five containment guarantees here (kernelsmith doctor says why)."""
    import ipaddress

    from kernelsmith.evaluate.sandboxing import containment

    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    plan = containment.plan(device)
    if loopback or plan.holds_all():
        return None
    missing = ", ".join(g for g, why in plan.guarantees().items() if why)
    return (
        f"WARNING: listening on {host}, but candidate sandboxes are NOT fully contained on this host "
        f"({missing}): anyone who can reach this port runs code here that can do that. "
        "Run `kernelsmith doctor`; KERNELSMITH_SANDBOX=strict refuses to start instead."
    )


def serve(
    host: str,
    port: int,
    backend: BackendConfig,
    device: str,
    workers: int | None,
    *,
    token_env: str | None = None,
    max_queue: int = 64,
    cache_size: int = 4096,
    max_body_bytes: int = 4 * 2**20,
    max_timeout: float = 900.0,
    say: Callable[[str], None] = print,
) -> None:
    import uvicorn

    from kernelsmith.serve.app import create_app
    from kernelsmith.serve.service import EvalService

    if backend.kind == "service":
        raise UserError("serve: the backend must be local or ray (a service cannot forward to another)")
    token = None
    if token_env is not None:
        token = read_token(token_env)
        if token is None:
            raise UserError(f"--token-env {token_env}: that environment variable is not set or empty")
    sock = bind(host, port)  # before the backend: a taken port fails in milliseconds
    pool = open_backend(backend, device, workers, EvalOptions(device=device))
    try:
        n = getattr(pool, "workers", workers or 1)
        service = EvalService(
            pool, device, n, backend.kind, max_queue=max_queue, cache_size=cache_size, max_timeout=max_timeout
        )
        app = create_app(service, token=token, max_body_bytes=max_body_bytes)
        config = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=10)
        server = uvicorn.Server(config)
        shown = "[::1]" if host == "::1" else host
        say(
            f"serving on http://{shown}:{sock.getsockname()[1]} (backend {backend.kind}, device {device}, "
            f"{n} worker{'s' if n != 1 else ''}, queue {max_queue}{', token required' if token else ''})"
        )
        warning = containment_warning(host, device)
        if warning:
            say(warning)
        server.run(sockets=[sock])
    finally:
        pool.close()
        sock.close()
