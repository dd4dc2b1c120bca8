"""A small OpenAI-compatible server for the tests (standard library only).

Its source is a service's command as it stands: ``%%k8s_serve`` runs it on the local serving
tier (a replica process, ``PORT`` and ``JT_REPLICA`` set) and on the Kubernetes emulator (the
kubelet runs the pod's command as a local process, ``PORT`` and ``HOSTNAME`` set). Every answer
carries ``X-Served-By`` (the replica or pod name).

Routes: ``GET /v1/models``; ``POST /v1/chat/completions`` and ``POST /v1/completions``, streamed
(SSE, one word per chunk) or not; ``GET /health``; ``/echo`` (any method: the request back as
JSON); ``GET /status/CODE`` (that status, a text body); ``GET /hostile`` (HTML and escape
sequences as text/html); ``POST /test/release`` (lets a held stream go on).

What the answer says is the last user message echoed: ``echo: WORDS``. A message containing
``[hold]`` streams three pieces, then waits for ``POST /test/release`` (so a test can see pieces
arrive before the stream ends without timing anything); ``[fail500]`` gets a 500 error body,
``[slow]`` waits 0.2 s between pieces, ``[md]`` answers a fixed Markdown text (a heading,
bold, code, links, a list, a fenced block, HTML as text), ``[params]`` answers the system prompt,
temperature and max_tokens it was sent. ``[flood]`` streams 64 KiB pieces without end (12 MiB
at most, or until the client goes); ``[bigevent]`` sends one event of 2 MiB of ``data:`` lines.

Streams as real servers send them (vLLM, llama.cpp, TGI, Ollama, LiteLLM), each on request by a
marker in the message: with ``stream_options: {"include_usage": true}`` (vLLM; svc.chat sends
it), or ``[usage]`` (llama.cpp sends it unasked), a last chunk with empty ``choices`` and the
``usage`` comes before ``[DONE]`` (``prompt_tokens`` 5; ``completion_tokens`` one a piece plus
the reasoning's); ``[keepalive]``: ``: keep-alive`` and bare ``:`` comment lines between chunks;
``[role]``: a role-only first chunk (``delta: {"role": "assistant"}``); ``[reasoning]``:
``reasoning_content`` then ``reasoning`` pieces before the answer (REASONING: three tokens in
the first piece, two in the second; the usage counts them); ``[eos]``: a last chunk with an
empty delta and ``finish_reason: "eos_token"``; ``[quirks]``: all of these. ``[inband-error]``
streams two pieces, then ``{"error": {...}}`` after the HTTP 200, and ends without ``[DONE]``.
``[no-stream-options]`` answers a request that has ``stream_options`` with a 400
(``Unrecognized request argument supplied: stream_options``, as older servers do). The models
list carries llama.cpp's extra ``models`` key.
"""

import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = os.environ.get("MODEL_ID", "tiny-echo")
WHO = os.environ.get("JT_REPLICA") or os.environ.get("HOSTNAME") or "unknown"
PORT = int(os.environ.get("PORT") or os.environ.get("JT_PORT") or 8000)
HOST = "127.0.0.1" if os.environ.get("JT_REPLICA") else "0.0.0.0"  # local tier: loopback only
HOLD_PIECES = 3
RELEASE = threading.Event()
REASONING = ("thinking about it", " still thinking")
REASONING_TOKENS = 5  # the usage's count of the reasoning pieces' tokens
QUIRKS = ("[usage]", "[keepalive]", "[role]", "[reasoning]", "[eos]")
HOSTILE = ('<img src=x onerror="window.__pwned=1"><b>bold?</b>\x1b[31mred?\x1b[0m '
           '<script>window.__pwned=2</script>')

MARKDOWN = ("## Plan\n\nUse **uPlot** and `pip install x`; see [the docs](https://example.org/docs) "
            "or [this](javascript:window.__pwned=3).\n\n- first\n"
            "- second <img src=x onerror=\"window.__pwned=4\">"
            "\n\n```python\nprint('<b>hi</b>')\n```\n")


def words_of(text):
    words = ("echo: " + text).split()
    return [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # a streamed answer ends when the connection closes

    def log_message(self, fmt, *args):
        print(f"{WHO} {self.command} {self.path.split('?')[0][:200]}", flush=True)

    def _send(self, status, body, ctype="application/json"):
        data = (body if isinstance(body, str) else json.dumps(body)).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Served-By", WHO)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _error(self, status, message, kind="invalid_request_error"):
        self._send(status, {"error": {"message": message, "type": kind, "code": status}})

    def _body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _json_body(self):
        try:
            payload = json.loads(self._body() or b"null")
        except ValueError:
            self._error(400, "the body is not JSON")
            return None
        if not isinstance(payload, dict):
            self._error(400, "the body must be a JSON object")
            return None
        if payload.get("model") not in (None, MODEL):
            self._error(404, f"The model `{payload.get('model')}` does not exist.", "NotFoundError")
            return None
        return payload

    # --- routes ------------------------------------------------------------------------------
    def do_GET(self):
        path = self.path.split("?")[0]
        if path == "/v1/models":
            models = [{"id": MODEL, "object": "model", "owned_by": "tests"}]
            self._send(200, {"object": "list", "data": models,
                             "models": [{"name": MODEL, "model": MODEL, "type": "model"}]})
        elif path == "/health":
            self._send(200, "ok", "text/plain")
        elif path == "/hostile":
            self._send(200, HOSTILE, "text/html; charset=utf-8")
        elif path.startswith("/status/") and path[8:].isdigit() and 200 <= int(path[8:]) <= 599:
            code = int(path[8:])
            self._send(code, f"status {code} from {WHO}: <b>not bold</b>\n", "text/plain; charset=utf-8")
        elif path == "/echo":
            self.do_echo()
        else:
            self._error(404, f"no route {path}")

    def do_echo(self):
        body = self._body()
        self._send(200, {"method": self.command, "path": self.path,
                         "content_type": self.headers.get("Content-Type"),
                         "x_test": self.headers.get("X-Test"),
                         "body": body.decode("utf-8", errors="replace")})

    do_PUT = do_PATCH = do_DELETE = do_echo

    def do_POST(self):
        path = self.path.split("?")[0]
        if path == "/test/release":
            RELEASE.set()
            self._send(200, {"released": True})
        elif path == "/echo":
            self.do_echo()
        elif path in ("/v1/chat/completions", "/v1/completions"):
            payload = self._json_body()
            if payload is None:
                return
            chat = path == "/v1/chat/completions"
            if chat:
                messages = payload.get("messages")
                if not isinstance(messages, list) or not messages:
                    self._error(400, "messages: a non-empty list is required")
                    return
                users = [m.get("content", "") for m in messages
                         if isinstance(m, dict) and m.get("role") == "user"]
                prompt = users[-1] if users else ""
            else:
                prompt = payload.get("prompt")
                if not isinstance(prompt, str):
                    self._error(400, "prompt: a string is required")
                    return
            if "[fail500]" in prompt:
                self._error(500, "the model crashed <b>badly</b>", "InternalServerError")
                return
            if "[no-stream-options]" in prompt and "stream_options" in payload:
                self._error(400, "Unrecognized request argument supplied: stream_options")
                return
            pieces = words_of(prompt)
            if "[md]" in prompt:  # an answer in Markdown, split on its spaces (newlines kept)
                pieces = [p + " " for p in MARKDOWN.split(" ")]
            if "[params]" in prompt and chat:  # what the chat was asked with, back
                system = [m.get("content") for m in messages
                          if isinstance(m, dict) and m.get("role") == "system"]
                pieces = words_of(f"system={system} temperature={payload.get('temperature')} "
                                  f"max_tokens={payload.get('max_tokens')} turns={len(messages)}")
            if payload.get("stream"):
                options = payload.get("stream_options")
                quirks = {q for q in QUIRKS if q in prompt or "[quirks]" in prompt}
                if isinstance(options, dict) and options.get("include_usage") is True:
                    quirks.add("[usage]")
                self._stream(pieces, chat, "[hold]" in prompt, "[slow]" in prompt,
                             quirks=quirks, inband="[inband-error]" in prompt)
            else:
                text = "".join(pieces)
                message = {"role": "assistant", "content": text}
                choice = ({"index": 0, "message": message, "finish_reason": "stop"}
                          if chat else {"index": 0, "text": text, "finish_reason": "stop"})
                self._send(200, {"id": "cmpl-1", "object": "chat.completion" if chat else "text_completion",
                                 "created": int(time.time()), "model": MODEL, "choices": [choice],
                                 "usage": {"completion_tokens": len(pieces)}})
        else:
            self._error(404, f"no route {path}")

    def _chunk(self, chat, choices, **extra):
        chunk = {"id": "cmpl-1", "object": "chat.completion.chunk" if chat else "text_completion",
                 "created": int(time.time()), "model": MODEL, "choices": choices, **extra}
        self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        self.wfile.flush()

    def _stream(self, pieces, chat, hold, slow, *, quirks=(), inband=False):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("X-Served-By", WHO)
        self.end_headers()
        self.wfile.write(b": a comment line, ignored by SSE clients\n\n")
        if "[bigevent] " in "".join(pieces) or pieces[-1:] == ["[bigevent]"]:
            try:
                for _ in range(2048):
                    self.wfile.write(b"data: " + b"x" * 1024 + b"\n")
            except OSError:
                pass
            return
        if "[flood] " in "".join(pieces) or pieces[-1:] == ["[flood]"]:
            pieces = ["y" * 65536] * 192  # 12 MiB
        keepalive = "[keepalive]" in quirks
        if chat and "[role]" in quirks:
            self._chunk(chat, [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                "finish_reason": None}])
        reasoned = chat and "[reasoning]" in quirks
        if reasoned:
            for key, text in zip(("reasoning_content", "reasoning"), REASONING, strict=True):
                if keepalive:
                    self.wfile.write(b": keep-alive\n\n")
                self._chunk(chat, [{"index": 0, "delta": {key: text}, "finish_reason": None}])
        for i, piece in enumerate(pieces):
            if inband and i == 2:
                self.wfile.write(b'data: {"error": {"message": "the engine died: CUDA error <b>x</b>", '
                                 b'"type": "InternalServerError", "code": 500}}\n\n')
                self.wfile.flush()
                return
            if keepalive:
                self.wfile.write(b": keep-alive\n\n:\n\n")
            if hold and i == HOLD_PIECES:
                RELEASE.wait(300)
                RELEASE.clear()
            if slow and i:
                time.sleep(0.2)
            choice = ({"index": 0, "delta": {"content": piece}, "finish_reason": None}
                      if chat else {"index": 0, "text": piece, "finish_reason": None})
            chunk = {"id": "cmpl-1", "object": "chat.completion.chunk" if chat else "text_completion",
                     "created": int(time.time()), "model": MODEL, "choices": [choice]}
            try:
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
            except OSError:  # the client went away (a capped answer): nothing more to send
                return
        if chat and "[eos]" in quirks:
            self._chunk(chat, [{"index": 0, "delta": {}, "finish_reason": "eos_token"}])
        if "[usage]" in quirks:
            tokens = len(pieces) + (REASONING_TOKENS if reasoned else 0)
            self._chunk(chat, [], usage={"prompt_tokens": 5, "completion_tokens": tokens,
                                         "total_tokens": 5 + tokens})
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


print(f"openai test server {MODEL} on {HOST}:{PORT} as {WHO}", flush=True)
ThreadingHTTPServer((HOST, PORT), Handler).serve_forever()
