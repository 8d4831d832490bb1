"""A scripted OpenAI-compatible chat server on 127.0.0.1, for tests, benchmarks and GPU demos.

No LLM is reachable on our machines, yet the client and the evolution engine must be exercised
through real HTTP and the real openai library: replies, errors, Retry-After, slow answers and
dropped connections. Each chat request consumes the next step of a script (or asks a
responder function); standard library only, so it runs anywhere the package does.

Step keys: reply (str or None), status (int, default 200), retry_after (s), body (dict or str,
sent as is instead of the generated completion or error), delay (s, before answering), drop
(true: close without answering), prompt_tokens, completion_tokens, finish_reason, usage (false:
leave usage out of the reply).
"""

from __future__ import annotations

import argparse
import collections
import http
import json
import signal
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

STEP_KEYS = frozenset(
    {
        "reply",
        "status",
        "retry_after",
        "body",
        "delay",
        "drop",
        "prompt_tokens",
        "completion_tokens",
        "finish_reason",
        "usage",
    }
)
_ERROR_KINDS = {
    400: ("invalid_request_error", "bad_request"),
    401: ("authentication_error", "invalid_api_key"),
    403: ("permission_error", "forbidden"),
    404: ("invalid_request_error", "model_not_found"),
    422: ("invalid_request_error", "unprocessable"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
}


def check_step(step: object) -> dict:
    """The step itself if it is well formed, else ValueError saying what is wrong."""
    if not isinstance(step, dict):
        raise ValueError(f"a step must be a JSON object, not {step!r}")
    unknown = sorted(set(step) - STEP_KEYS)
    if unknown:
        raise ValueError(f"unknown step key(s) {unknown}; known: {sorted(STEP_KEYS)}")
    if not ({"reply", "status", "drop", "body"} & set(step)):
        raise ValueError(f"a step needs 'reply', 'status', 'body' or 'drop': {step!r}")
    return step


def _words(text: object) -> int:
    """Whitespace-split word count: the scripted server's stand-in for a tokenizer."""
    if text is None:
        return 0
    return len((text if isinstance(text, str) else json.dumps(text)).split())


def chat_completion(request: dict, step: dict, number: int) -> dict:
    """A chat.completion body answering `request` with the step's reply."""
    reply = step.get("reply")
    messages = [m for m in request.get("messages", []) if isinstance(m, dict)]
    prompt = sum(_words(m.get("content")) for m in messages)
    body = {
        "id": f"chatcmpl-scripted-{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", "scripted"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": reply},
                "finish_reason": step.get("finish_reason", "stop"),
                "logprobs": None,
            }
        ],
    }
    if step.get("usage", True):
        p = step.get("prompt_tokens", prompt)
        c = step.get("completion_tokens", _words(reply))
        body["usage"] = {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}
    return body


def error_body(status: int, message: str | None = None) -> dict:
    """An OpenAI-style error body for an HTTP status."""
    kind, code = _ERROR_KINDS.get(status, ("server_error" if status >= 500 else "error", None))
    if message is None:
        try:
            message = f"scripted {http.HTTPStatus(status).phrase.lower()}"
        except ValueError:
            message = f"scripted error {status}"
    return {"error": {"message": message, "type": kind, "code": code, "param": None}}


class _Handler(BaseHTTPRequestHandler):
    """One HTTP/1.0 exchange (one request per connection, so a drop affects only itself)."""

    scripted: ScriptedServer  # set on the per-server subclass

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - base signature
        pass  # tests and demos want a quiet server

    def _send(self, status: int, body: dict | str, headers: dict[str, str] | None = None) -> None:
        data = (body if isinstance(body, str) else json.dumps(body)).encode()
        try:
            self.send_response(status)
            ctype = "text/plain" if isinstance(body, str) else "application/json"
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (its timeout); nothing to tell it

    def _authorized(self) -> bool:
        key = self.scripted.api_key
        return key is None or self.headers.get("Authorization") == f"Bearer {key}"

    def do_GET(self) -> None:
        if not self._authorized():
            return self._send(401, error_body(401, "Incorrect API key provided"))
        if self.path.rstrip("/") != "/v1/models":
            return self._send(404, error_body(404, f"no route GET {self.path}"))
        model = {"id": "scripted", "object": "model", "created": 0, "owned_by": "scripted"}
        self._send(200, {"object": "list", "data": [model]})

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.rstrip("/") != "/v1/chat/completions":
            return self._send(404, error_body(404, f"no route POST {self.path}"))
        try:
            request = json.loads(raw)
        except ValueError:
            return self._send(400, error_body(400, "request body is not JSON"))
        number = self.scripted._record(request)
        if not self._authorized():
            return self._send(401, error_body(401, "Incorrect API key provided"))
        try:
            step = self.scripted._next_step(request)
        except Exception as exc:  # a broken responder: say so to the client, loudly
            return self._send(500, error_body(500, f"responder failed: {exc!r}"))
        if step is None:
            return self._send(500, error_body(500, "script exhausted"))
        self._answer(request, step, number)

    def _answer(self, request: dict, step: dict, number: int) -> None:
        if step.get("delay"):
            time.sleep(float(step["delay"]))
        if step.get("drop"):
            self.close_connection = True
            return  # no bytes at all: the client sees the connection close
        status = int(step.get("status", 200))
        headers = {}
        if step.get("retry_after") is not None:
            headers["Retry-After"] = f"{step['retry_after']:g}"
        if "body" in step:
            body = step["body"]
        elif status == 200:
            body = chat_completion(request, step, number)
        elif status == 404:
            body = error_body(404, f"The model '{request.get('model')}' does not exist")
        else:
            body = error_body(status)
        self._send(status, body, headers)


class ScriptedServer:
    """A scripted chat server; use as a context manager. `url` is the base_url to give clients."""

    def __init__(
        self,
        script: list[dict] | None = None,
        responder: Callable[[dict], dict] | None = None,
        api_key: str | None = None,
        default: dict | None = None,
        port: int = 0,
    ) -> None:
        self._steps = collections.deque(check_step(s) for s in (script or []))
        self._default = check_step(default) if default is not None else None
        self._responder = responder
        self.api_key = api_key
        self._port = port
        self._lock = threading.Lock()
        self._requests: list[dict] = []
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._url: str | None = None  # kept after stop, for messages that name it

    @property
    def url(self) -> str:
        if self._url is None:
            raise RuntimeError("ScriptedServer is not started; use it as a context manager")
        return self._url

    @property
    def requests(self) -> list[dict]:
        """A copy of the chat request bodies received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    def _record(self, request: dict) -> int:
        with self._lock:
            self._requests.append(request)
            return len(self._requests)

    def _next_step(self, request: dict) -> dict | None:
        if self._responder is not None:
            return check_step(self._responder(request))
        with self._lock:
            return self._steps.popleft() if self._steps else self._default

    def start(self) -> ScriptedServer:
        handler = type("ScriptedHandler", (_Handler,), {"scripted": self})
        httpd = ThreadingHTTPServer(("127.0.0.1", self._port), handler, bind_and_activate=False)
        httpd.daemon_threads = True
        httpd.request_queue_size = 128  # many concurrent clients in benchmarks
        try:
            httpd.server_bind()
            httpd.server_activate()
        except OSError:
            httpd.server_close()
            raise
        self._httpd = httpd
        self._url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), name="scripted-llm", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            if self._thread is None:
                raise RuntimeError("the scripted server's thread was never started")
            self._thread.join()
            self._httpd = None

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def load_script(path: Path) -> tuple[list[dict], dict | None]:
    """The steps and default of a script file {"steps": [...], "default": {...}}."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read script {path}: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("steps", []), list):
        raise ValueError(f'script {path} must be an object {{"steps": [...], "default": {{...}}}}')
    unknown = sorted(set(data) - {"steps", "default"})
    if unknown:
        raise ValueError(f"script {path}: unknown key(s) {unknown}")
    steps = [check_step(s) for s in data.get("steps", [])]
    default = data.get("default")
    return steps, check_step(default) if default is not None else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kernelsmith.llm.scripted_server",
        description="Serve a scripted OpenAI-compatible chat endpoint; prints its URL first.",
    )
    parser.add_argument("--script", required=True, type=Path, help="JSON file with steps")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free)")
    parser.add_argument("--api-key", default=None, help="require 'Authorization: Bearer KEY'")
    args = parser.parse_args(argv)
    try:
        steps, default = load_script(args.script)
        server = ScriptedServer(steps, default=default, api_key=args.api_key, port=args.port)
        server.start()
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        print(server.url, flush=True)
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
