"""Evaluation as an HTTP service: `kernelsmith serve` (app.py, service.py, server.py). The
backends that evaluate (local, Ray, this service's client) live in kernelsmith.evaluate.backends.

Nothing here imports FastAPI or uvicorn at module level.
"""
