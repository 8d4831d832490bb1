"""Everything a search run is configured by: one nested, typed config.

A TOML or YAML file holds all of it (`--config`); the `evolve` flags override a few fields.
Strings may name environment variables as `${VAR}` (keys, URLs), resolved when the file is
read. Unknown keys are errors, so a typo never silently falls back to a default.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from kernelsmith.errors import UserError
from kernelsmith.evaluate.backends import BackendConfig
from kernelsmith.evaluate.options import EvalOptions, memory_limit_bytes
from kernelsmith.llm.config import LLMConfig


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ArchiveConfig(_Strict):
    islands: int = Field(default=2, ge=1)
    # Ring migration: every `migration_interval` new programs, each island's best
    # `migration_count` correct programs are copied to the next island (0: never).
    migration_interval: int = Field(default=10, ge=0)
    migration_count: int = Field(default=1, ge=0)
    # MAP-Elites descriptors (names in kernelsmith.evolve.descriptors.FEATURES) and bins per feature.
    features: list[str] = Field(default_factory=lambda: ["launches", "complexity", "uses_dot"])
    bins: int = Field(default=4, ge=2, le=16)
    # Parent selection: with probability exploit_ratio among the island's `elite_k` best
    # (weighted by score), otherwise a random occupied cell of the grid (diversity).
    elite_k: int = Field(default=5, ge=1)
    exploit_ratio: float = Field(default=0.7, ge=0.0, le=1.0)
    top_inspirations: int = Field(default=2, ge=0)
    diverse_inspirations: int = Field(default=2, ge=0)

    @model_validator(mode="after")
    def _known_features(self):
        from kernelsmith.evolve.descriptors import FEATURES

        unknown = [f for f in self.features if f not in FEATURES]
        if unknown:
            raise ValueError(f"unknown feature {unknown[0]!r}; known: {', '.join(sorted(FEATURES))}")
        return self


class OperatorWeights(_Strict):
    """How often each operator is picked for a correct parent: the LLM's `rewrite`, `diff` and
    `crossover`, and the LLM-free `tune` (launch parameters). With an LLM, `repair` is used
    whenever the parent failed and `translate` when there is no program yet."""

    rewrite: float = Field(default=1.0, ge=0.0)
    diff: float = Field(default=0.0, ge=0.0)
    crossover: float = Field(default=0.0, ge=0.0)
    tune: float = Field(default=0.0, ge=0.0)

    @model_validator(mode="after")
    def _some_weight(self):
        if self.rewrite + self.diff + self.crossover + self.tune <= 0:
            raise ValueError("at least one operator needs a positive weight")
        return self

    @property
    def uses_llm(self) -> bool:
        return self.rewrite + self.diff + self.crossover > 0


class PromptConfig(_Strict):
    templates_dir: str | None = None  # a folder of templates that replace the bundled ones by name
    history: int = Field(default=5, ge=0)  # recent attempts shown with their outcomes
    error_chars: int = Field(default=1500, ge=100)  # error text kept per program in a prompt
    profile_chars: int = Field(default=900, ge=100)  # the kernel breakdown of a parent (profile.txt)


class ProfileConfig(_Strict):
    """The counters stage (Nsight Compute) in a search: for each new best of its island on CUDA, so
    that its children's prompts say why it is as fast as it is. Never part of a verdict."""

    when: Literal["best", "off"] = "best"
    timeout: float = Field(default=120.0, gt=0, allow_inf_nan=False)  # seconds per profiled program
    # A profile starts only while profiling has used at most this share of the search's wall time.
    max_share: float = Field(default=0.10, ge=0.0, le=1.0)


class TunerConfig(_Strict):
    """What the LLM-free tuner may change (docs/suite.md, "The tuner")."""

    # tl.constexpr names to tune besides the block-like ones (BLOCK*, TILE*, ...): a constexpr that is not a
    # block (`MODE`, `HAS_BIAS`) is the kernel's meaning, so the tuner leaves it unless it is named here
    constexprs: list[str] = Field(default_factory=list)


class EvolveConfig(_Strict):
    iterations: int = Field(default=40, ge=0)  # the paper's 40 rounds per task
    random_seed: int = 0
    max_in_flight: int = Field(
        default=4, ge=1
    )  # proposals being written or evaluated at once (at least one per worker)
    early_stop: int | None = Field(default=None, ge=1)  # stop after this many iterations without a new best
    max_cost: float | None = Field(default=None, ge=0)  # USD, from the per-model prices
    max_tokens: int | None = Field(default=None, ge=0)  # prompt + completion tokens
    time_limit: float | None = Field(default=None, gt=0)  # seconds of this invocation
    workers: int | None = Field(default=None, ge=1)  # evaluation workers (default: one per GPU; 1 on the CPU)
    llm: LLMConfig = Field(default_factory=LLMConfig)
    archive: ArchiveConfig = Field(default_factory=ArchiveConfig)
    operators: OperatorWeights = Field(default_factory=OperatorWeights)
    prompts: PromptConfig = Field(default_factory=PromptConfig)
    profile: ProfileConfig = Field(default_factory=ProfileConfig)
    tuner: TunerConfig = Field(default_factory=TunerConfig)
    evaluation: EvalOptions = Field(default_factory=EvalOptions)
    backend: BackendConfig = Field(default_factory=BackendConfig)


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _expand(value, where: str):
    if isinstance(value, str):

        def sub(m: re.Match) -> str:
            if m.group(1) not in os.environ:
                raise UserError(f"config {where}: environment variable {m.group(1)} is not set")
            return os.environ[m.group(1)]

        return _VAR.sub(sub, value)
    if isinstance(value, dict):
        return {k: _expand(v, where) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v, where) for v in value]
    return value


def read_config_file(path: str | Path) -> dict:
    p = Path(path)
    if p.is_dir():
        raise UserError(f"config file {p} is a directory, not a file")
    if not p.is_file():
        raise UserError(f"config file {p} does not exist")
    try:
        text = p.read_text(encoding="utf-8-sig")  # a byte-order mark (Windows editors) is not TOML
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read config file {p}: {exc} (save it as UTF-8)") from None
    try:
        if p.suffix == ".toml":
            data = tomllib.loads(text)
        elif p.suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text) or {}
        else:
            raise UserError(f"config file {p}: use .toml, .yaml or .yml")
    except (tomllib.TOMLDecodeError, ValueError) as exc:
        raise UserError(f"config file {p} is not valid: {str(exc).splitlines()[0]}") from None
    except Exception as exc:  # yaml.YAMLError and its kin
        if type(exc).__module__.startswith("yaml"):
            raise UserError(f"config file {p} is not valid YAML: {str(exc).splitlines()[0]}") from None
        raise
    if not isinstance(data, dict):
        raise UserError(f"config file {p}: the top level must be a table of settings")
    return {k: _expand(v, str(p)) for k, v in data.items()}  # _expand of the table, typed as one


def _check_sizes(data: dict, where: str) -> None:
    """A bad size is a UserError from inside validation, which would not name its setting: check it first."""
    evaluation = data.get("evaluation")
    if isinstance(evaluation, dict) and "memory_limit" in evaluation:
        try:
            memory_limit_bytes(evaluation["memory_limit"])
        except UserError as exc:
            raise UserError(f"{where}: [evaluation] memory_limit: {exc}") from None


def build_config(data: dict, where: str = "config") -> EvolveConfig:
    """An EvolveConfig from plain data; a bad field is one line naming its dotted path."""
    _check_sizes(data, where)
    try:
        return EvolveConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(x) for x in first.get("loc", ())) or "(top level)"
        raise UserError(f"{where}: {loc}: {first['msg']}") from None


def deep_update(base: dict, updates: dict) -> dict:
    out = dict(base)
    for k, v in updates.items():
        out[k] = deep_update(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def load_config(path: str | Path | None, overrides: dict | None = None) -> EvolveConfig:
    """The file's settings (if any), then the flags' `overrides` (nested dicts) on top."""
    if not path:
        return build_config(overrides or {}, "options")
    data = read_config_file(path)
    # The file alone first: a bad value in it is an error even where a flag would override it.
    build_config(data, f"config file {path}")
    return build_config(deep_update(data, overrides or {}), "options")
