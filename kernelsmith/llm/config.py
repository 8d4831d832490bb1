"""Typed configuration of the LLM endpoint(s) and the models sampled from them.

Unknown keys are errors (extra="forbid"): a typo in a config file must not silently fall back
to a default. Defaults live here only; the CLI and config files read them from these models.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ModelSpec(BaseModel):
    """One model to sample from; fields left None take the LLMConfig's values."""

    # Frozen so a spec can key the per-endpoint client table.
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    weight: float = Field(default=1.0, gt=0)
    base_url: str | None = None
    api_key_env: str | None = None
    price_in: float = Field(default=0.0, ge=0, description="USD per million prompt tokens")
    price_out: float = Field(default=0.0, ge=0, description="USD per million completion tokens")
    temperature: float | None = Field(default=None, ge=0)
    top_p: float | None = Field(default=None, gt=0, le=1)
    max_tokens: int | None = Field(default=None, gt=0)


def _default_models() -> list[ModelSpec]:
    return [ModelSpec(name="default")]


class LLMConfig(BaseModel):
    """An OpenAI-compatible endpoint, how to talk to it, and the weighted models to use."""

    model_config = ConfigDict(extra="forbid")

    base_url: str = "http://127.0.0.1:8000/v1"
    api_key_env: str = "OPENAI_API_KEY"
    api_key_file: str | None = Field(
        default=None, description="file whose stripped content is the key; wins over the env var"
    )
    models: list[ModelSpec] = Field(default_factory=_default_models, min_length=1)
    temperature: float = Field(default=0.6, ge=0)
    top_p: float = Field(default=0.95, gt=0, le=1)
    max_tokens: int | None = Field(default=None, gt=0)
    timeout: float = Field(default=600.0, gt=0, description="seconds per request")
    max_retries: int = Field(default=6, ge=0)
    backoff_base: float = Field(default=1.0, ge=0)
    backoff_max: float = Field(default=60.0, ge=0)
    concurrency: int = Field(default=4, ge=1, description="max requests in flight")

    def endpoint_given(self, spec: ModelSpec) -> bool:
        """Whether the user named `spec`'s endpoint (its own base_url or this config's), rather
        than leaving it to the default."""
        return spec.base_url is not None or "base_url" in self.model_fields_set
