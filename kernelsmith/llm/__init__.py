"""The LLM side of kernelsmith: an OpenAI-compatible client with retries, concurrency and cost.

`ScriptedServer` (kernelsmith.llm.scripted_server) stands in for a real endpoint in tests.
"""

from kernelsmith.llm.client import (
    Completion,
    LLMAuthError,
    LLMClient,
    LLMError,
    LLMRequestError,
    LLMUnavailable,
    Usage,
    resolve_api_key,
)
from kernelsmith.llm.config import LLMConfig, ModelSpec
from kernelsmith.llm.scripted_server import ScriptedServer

__all__ = [
    "Completion",
    "LLMAuthError",
    "LLMClient",
    "LLMConfig",
    "LLMError",
    "LLMRequestError",
    "LLMUnavailable",
    "ModelSpec",
    "ScriptedServer",
    "Usage",
    "resolve_api_key",
]
