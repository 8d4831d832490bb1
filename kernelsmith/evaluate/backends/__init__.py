"""Where evaluations run: local judge processes, Ray actors, or a `kernelsmith serve` service.

Every caller (evolve, evolve-suite, bench, the GRPO reward, the service itself) opens its
backend here, so the three share one set of settings and one set of error messages.
"""

from __future__ import annotations

import os
from typing import Literal

from pydantic import BaseModel, ConfigDict, model_validator

from kernelsmith.errors import UserError
from kernelsmith.evaluate.options import EvalOptions
from kernelsmith.evaluate.pool import EvalBackend, EvalPool

# The variable a client reads the service's bearer token from, unless backend.token_env names another.
DEFAULT_TOKEN_ENV = "KERNELSMITH_TOKEN"


class BackendConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # local: judge processes on this machine, one per GPU; ray: Ray actors, one per GPU of the
    # cluster; service: POST to a `kernelsmith serve` at `url`.
    kind: Literal["local", "ray", "service"] = "local"
    ray_address: str | None = None  # "auto", "ray://head:10001", ...; unset: start a local Ray instance
    url: str | None = None  # the service's base URL, e.g. http://gpu-host:8765
    token_env: str = DEFAULT_TOKEN_ENV  # the service's bearer token is read from this variable
    concurrency: int = 16  # requests in flight to the service

    @model_validator(mode="after")
    def _consistent(self):
        if self.kind == "service" and not self.url:
            raise ValueError("kind 'service' needs url")
        if self.url and self.kind != "service":
            raise ValueError(f"url is set but kind is {self.kind!r}: use kind = 'service'")
        if self.ray_address and self.kind != "ray":
            raise ValueError(f"ray_address is set but kind is {self.kind!r}: use kind = 'ray'")
        return self


def backend_overrides(eval_backend: str | None, ray_address: str | None, eval_url: str | None) -> dict:
    """The `backend` settings the --eval-backend, --ray-address and --eval-url flags give. A flag
    that sets the kind also clears the other kinds' settings from a config file."""
    if eval_url is not None and ray_address is not None:
        raise UserError("--eval-url and --ray-address contradict each other: evaluate on a service or on Ray")
    kind = "service" if eval_url is not None else "ray" if ray_address is not None else None
    if eval_backend is not None:
        if kind is not None and eval_backend != kind:
            raise UserError(
                f"--eval-backend {eval_backend} contradicts "
                + ("--eval-url" if eval_url is not None else "--ray-address")
            )
        kind = eval_backend
    if kind is None:
        return {}
    out: dict = {"kind": kind}
    if kind != "service" or eval_url is not None:
        out["url"] = eval_url
    if kind != "ray" or ray_address is not None:
        out["ray_address"] = ray_address
    return out


def backend_from_flags(eval_backend: str | None, ray_address: str | None, eval_url: str | None) -> BackendConfig:
    """The backend of a command that has no config file (bench, train grpo)."""
    if eval_backend == "service" and eval_url is None:
        raise UserError("--eval-backend service needs --eval-url")
    return BackendConfig(**backend_overrides(eval_backend, ray_address, eval_url))


def read_token(token_env: str) -> str | None:
    token = os.environ.get(token_env, "").strip()
    return token or None


def open_backend(
    cfg: BackendConfig, device: str, workers: int | None, options: EvalOptions, gpus: list[str] | None = None
) -> EvalBackend:
    """An open backend for `device`; the caller closes it. `gpus` picks local GPUs by id."""
    if gpus is not None and cfg.kind != "local":
        raise UserError(f"choosing GPUs by id applies to the local backend, not {cfg.kind}")
    if cfg.kind == "local":
        return EvalPool(device=device, workers=workers, options=options, gpus=gpus)
    if cfg.kind == "ray":
        from kernelsmith.evaluate.backends.ray import RayPool

        return RayPool(device=device, workers=workers, options=options, address=cfg.ray_address)
    from kernelsmith.evaluate.backends.remote import RemoteBackend

    if cfg.url is None:  # the validator requires it; a config built without validation may lack it
        raise UserError("backend kind 'service' needs url")
    return RemoteBackend(
        cfg.url,
        token=read_token(cfg.token_env),
        token_env=cfg.token_env,
        options=options.model_copy(update={"device": device}),
        concurrency=cfg.concurrency,
    )
