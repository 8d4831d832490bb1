"""Evaluation as a service: the HTTP server, its client, the Ray pool, and the choice between them.

Nothing here imports FastAPI, uvicorn or Ray at module level: a search that evaluates locally
never needs them.
"""

from kernelsmith.serve.backends import BackendConfig, open_backend

__all__ = ["BackendConfig", "open_backend"]
