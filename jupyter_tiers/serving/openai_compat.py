"""Pure: Server-Sent Events and the OpenAI-compatible API (vLLM, TGI, llama.cpp, ...).

:class:`SSEParser` turns bytes as they arrive into events (the WHATWG EventSource rules: ``\\n``,
``\\r\\n`` or ``\\r`` line ends, ``:`` comments, ``data:`` lines joined, an event ends at a blank
line, an unfinished one at the end of the stream is dropped). The rest reads and writes the
OpenAI payloads: the models list (its presence is how a server is detected as compatible),
chat requests, streamed chunks and error bodies. No I/O: serve_http.py does that.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..core.errors import SpecError, TiersError
from ..core.plaintext import printable

MAX_LINE = 1024 * 1024  # bytes of one SSE line (a chunk of one token is ~200)
MAX_EVENT = 1024 * 1024  # characters of one event's data (its data: lines joined)
MAX_ANSWER = 8 * 1024 * 1024  # bytes of one chat answer's text (as request() keeps of a body)
DONE = "[DONE]"
_BOM = b"\xef\xbb\xbf"
_LINE_END = re.compile(rb"[\r\n]")
ROLES = ("system", "user", "assistant", "tool", "developer")
MAX_MESSAGES = 1000
#: Sampling parameters ``chat`` passes through, and the types they may have.
CHAT_PARAMS: dict[str, tuple[type, ...]] = {
    "max_tokens": (int,), "temperature": (int, float), "top_p": (int, float), "seed": (int,),
    "stop": (str, list), "presence_penalty": (int, float), "frequency_penalty": (int, float),
    "n": (int,),
}


class SSEError(TiersError):
    """A stream that is not Server-Sent Events (a line longer than MAX_LINE, an event longer
    than MAX_EVENT)."""


@dataclass(frozen=True)
class SSEEvent:
    """One dispatched event: its type (``message`` by default), data and last event id."""

    data: str
    event: str = "message"
    id: str = ""


class SSEParser:
    """Incremental SSE parser: ``feed(bytes)`` returns the events those bytes completed."""

    def __init__(self) -> None:
        # The bytes of the line not yet ended; its first _scanned bytes are known to hold no line
        # end, so each byte is searched once however small the pieces it arrives in.
        self._buf = bytearray()
        self._scanned = 0
        self._started = False
        self._data: list[str] = []
        self._size = 0  # characters in _data (a server may send data: lines without end)
        self._event = ""
        self._id = ""
        self._cr = False  # the last chunk ended in \r: a \n first in the next one is the same line end

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        if self._cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        self._cr = chunk.endswith(b"\r")
        buf = self._buf
        buf += chunk  # in place: amortised to the chunk's length, not a copy of the whole line
        if not self._started:  # a byte order mark first in the stream is dropped
            if _BOM.startswith(buf):
                return []
            self._started = True
            if buf.startswith(_BOM):
                del buf[:3]
        events: list[SSEEvent] = []
        start = 0
        found = _LINE_END.search(buf, self._scanned)
        while found is not None:
            end = found.start()
            line = buf[start:end].decode("utf-8", errors="replace")
            start = end + (2 if buf[end:end + 2] == b"\r\n" else 1)
            event = self._line(line)
            if event is not None:
                events.append(event)
            found = _LINE_END.search(buf, start)
        del buf[:start]  # what is left came in this chunk (the rest of the line had no end)
        self._scanned = len(buf)
        if len(buf) > MAX_LINE:
            raise SSEError(f"an event stream line longer than {MAX_LINE} bytes: not Server-Sent Events")
        return events

    def _line(self, line: str) -> SSEEvent | None:
        if not line:
            if not self._data:
                self._event = ""
                return None
            event = SSEEvent("\n".join(self._data), self._event or "message", self._id)
            self._data, self._event, self._size = [], "", 0
            return event
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._size += len(value) + 1
            if self._size > MAX_EVENT:
                raise SSEError(f"an event longer than {MAX_EVENT // 1024 // 1024} MiB (data: lines without "
                               "the blank line that ends an event): not a stream of answer pieces")
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._id = value
        return None  # retry and unknown fields: ignored


def parse_sse(chunks: Iterable[bytes]) -> list[SSEEvent]:
    """Every event of a whole stream given in chunks."""
    parser = SSEParser()
    return [event for chunk in chunks for event in parser.feed(chunk)]


# --- OpenAI payloads -------------------------------------------------------------------------------

def model_ids(payload: Any) -> tuple[str, ...] | None:
    """The model ids of a ``/v1/models`` answer, or None when it is not one (not compatible).
    Besides the list (``{"object": "list", "data": [{"id": ...}, ...]}``, extra keys such as
    llama.cpp's ``models`` ignored), one model object alone (``{"object": "model", "id": ...}``,
    as some TGI versions answer) counts; list entries without an ``id`` are skipped, but a list
    none of whose entries has one is not a models list."""
    if isinstance(payload, dict) and payload.get("object") == "model" and isinstance(payload.get("id"), str):
        return (printable(payload["id"])[:300],)
    if not isinstance(payload, dict) or not isinstance(payload.get("data"), list):
        return None
    ids = [printable(item["id"])[:300] for item in payload["data"]
           if isinstance(item, dict) and isinstance(item.get("id"), str)]
    if payload["data"] and not ids:
        return None
    return tuple(ids)


def check_messages(messages: Any) -> list[dict[str, str]]:
    """Chat messages: a text (one user message) or a list of ``{"role", "content"}`` dicts."""
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    if not isinstance(messages, (list, tuple)) or not messages:
        want = "a text or a non-empty list of {'role', 'content'} dicts"
        raise SpecError("messages", f"{want}, got {messages!r}"[:160])
    if len(messages) > MAX_MESSAGES:
        raise SpecError("messages", f"at most {MAX_MESSAGES}, got {len(messages)}")
    out = []
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or set(msg) - {"role", "content", "name"}:
            raise SpecError("messages", f"item {i}: a dict with 'role' and 'content', got {msg!r}"[:160])
        role, content = msg.get("role"), msg.get("content")
        if role not in ROLES:
            raise SpecError("messages", f"item {i}: role one of {', '.join(ROLES)}, got {role!r}"[:160])
        if not isinstance(content, str):
            raise SpecError("messages", f"item {i}: content must be text, got {type(content).__name__}")
        out.append({k: v for k, v in msg.items()})
    return out


def chat_request(messages: Any, *, model: str | None, stream: bool, params: dict[str, Any]) -> dict[str, Any]:
    """The ``/v1/chat/completions`` body; SpecError for a bad message or parameter."""
    body: dict[str, Any] = {"messages": check_messages(messages), "stream": bool(stream)}
    if model is not None:
        if not isinstance(model, str) or not model or len(model) > 300:
            raise SpecError("model", f"a model id from svc.models(), got {model!r}"[:120])
        body["model"] = model
    for key, value in params.items():
        types = CHAT_PARAMS.get(key)
        if types is None:
            raise SpecError(key, f"not a chat parameter; allowed: {', '.join(CHAT_PARAMS)}")
        if isinstance(value, bool) or not isinstance(value, types):
            raise SpecError(key, f"a {' or '.join(t.__name__ for t in types)}, got {value!r}"[:120])
        body[key] = value
    return body


#: What a streamed chat asks for, so the server's last chunk carries the usage (token counts);
#: a server that refuses it (400) is asked again without it (engine/serve_http.py).
STREAM_OPTIONS = {"include_usage": True}
_MAX_FINISH = 60  # characters of a finish_reason kept


@dataclass(frozen=True)
class ChunkParts:
    """What one streamed chunk carries, as real servers send it (vLLM, llama.cpp, TGI, Ollama,
    LiteLLM): answer ``text`` (``""`` for a role-only first chunk, or a last usage chunk whose
    ``choices`` is empty), ``reasoning`` (a reasoning model's ``delta.reasoning_content`` or
    ``delta.reasoning``, kept apart from the answer), ``finish_reason`` (``stop``, ``length``, or
    a server's own such as ``eos_token``), ``usage``: the server's token counts
    (:func:`usage_of`; a last chunk with empty ``choices`` carries them), and ``error``: the
    message of an in-band ``{"error": ...}`` chunk sent after HTTP 200."""

    text: str = ""
    reasoning: str = ""
    finish_reason: str | None = None
    usage: dict[str, int] | None = None
    error: str | None = None


def chunk_parts(data: str) -> ChunkParts | None:
    """The :class:`ChunkParts` of one event's data; None for the ``[DONE]`` marker. Data that
    is not JSON, or JSON holding none of the parts, gives an empty ChunkParts."""
    if data.strip() == DONE:
        return None
    try:
        payload = json.loads(data)
    except ValueError:
        return ChunkParts()
    return answer_parts(payload, streamed=True)


def answer_parts(payload: Any, *, streamed: bool = False) -> ChunkParts:
    """The :class:`ChunkParts` of a decoded chunk (``streamed``) or of a whole answer (its
    ``message`` in place of the ``delta``); an error body gives ``error``."""
    if not isinstance(payload, dict):
        return ChunkParts()
    if payload.get("error") not in (None, "", {}, []):
        return ChunkParts(error=error_text(payload, "the server sent an error"))
    choices = payload.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    part = choice.get("delta" if streamed else "message")
    reasoning = ""
    if isinstance(part, dict):
        for key in ("reasoning_content", "reasoning"):
            if isinstance(part.get(key), str) and part[key]:
                reasoning = part[key]
                break
    finish = choice.get("finish_reason")
    return ChunkParts(text=_choice_text(payload, streamed=streamed), reasoning=reasoning,
                      finish_reason=printable(finish)[:_MAX_FINISH] if isinstance(finish, str) else None,
                      usage=usage_of(payload))


class StreamErrorScan:
    """Watches a streamed answer's bytes for an in-band error (an ``event: error`` or a
    ``{"error": ...}`` chunk after HTTP 200): the load test counts such an answer as failed,
    not as a success. ``error`` is the first one's message (None while there is none)."""

    def __init__(self) -> None:
        self._parser = SSEParser()
        self.error: str | None = None

    def feed(self, chunk: bytes) -> None:
        """Read the next bytes of the stream (nothing more is read once an error was found)."""
        if self.error is not None:
            return
        try:
            events = self._parser.feed(chunk)
        except SSEError as exc:
            self.error = str(exc)
            return
        for event in events:
            if event.event == "error":
                payload: Any = None
                with contextlib.suppress(ValueError):
                    payload = json.loads(event.data)
                self.error = error_text(payload, event.data or "the server sent an error")
                return
            if '"error"' in event.data:
                parts = chunk_parts(event.data)
                if parts is not None and parts.error is not None:
                    self.error = parts.error
                    return


def chunk_text(data: str) -> str | None:
    """The text piece of one streamed chunk (chat ``delta.content`` or completions ``text``);
    None for the ``[DONE]`` marker. A chunk that is not JSON or has no text gives ``""``."""
    if data.strip() == DONE:
        return None
    try:
        payload = json.loads(data)
    except ValueError:
        return ""
    return _choice_text(payload, streamed=True)


def _choice_text(payload: Any, *, streamed: bool) -> str:
    if not isinstance(payload, dict):
        return ""
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return ""
    choice = choices[0]
    part = choice.get("delta" if streamed else "message")
    if isinstance(part, dict) and isinstance(part.get("content"), str):
        return str(part["content"])
    text = choice.get("text")
    return text if isinstance(text, str) else ""


USAGE_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")


def usage_of(payload: Any) -> dict[str, int] | None:
    """The server's own token counts from an answer or a streamed chunk (``{"usage":
    {"prompt_tokens", "completion_tokens", "total_tokens"}}``, as OpenAI, vLLM and llama.cpp send
    it), only the counts that are whole numbers from 0; None when it sends none (most streams do
    not, unless asked): then the panel counts pieces, not tokens."""
    usage = payload.get("usage") if isinstance(payload, dict) else None
    if not isinstance(usage, dict):
        return None
    counts = {k: v for k in USAGE_KEYS
              if isinstance(v := usage.get(k), int) and not isinstance(v, bool) and 0 <= v < 10**12}
    return counts or None


def completion_text(payload: Any) -> str:
    """The text of a whole (not streamed) chat or completions answer."""
    return _choice_text(payload, streamed=False)


def error_text(payload: Any, fallback: str) -> str:
    """The message of an error body (``{"error": {"message": ...}}``, ``{"error": "..."}``,
    ``{"detail": ...}``), else ``fallback``; one line, as text."""
    message: Any = None
    if isinstance(payload, dict):
        err = payload.get("error", payload.get("detail", payload.get("message")))
        message = err.get("message") if isinstance(err, dict) else err
    text = message if isinstance(message, str) and message.strip() else fallback
    return printable(" ".join(text.split()))[:500]


MIN_RATE_SPAN = 0.05  # seconds: pieces that came closer together than this were one burst


@dataclass
class ChatStats:
    """Time to first token and tokens per second of one streamed answer: a piece is one SSE
    chunk's text (or reasoning), which vLLM and TGI send one token at a time but other servers
    need not; the server's own counts (``usage``, from a last usage chunk or a whole answer), when
    it sends them, are the tokens."""

    started: float
    first: float | None = None
    last: float | None = None
    pieces: int = 0
    #: The server's token counts (:func:`usage_of`) when it sent them; None: it sent none.
    usage: dict[str, int] | None = None

    def add(self, now: float) -> None:
        if self.first is None:
            self.first = now
        self.last = now
        self.pieces += 1

    @property
    def ttft(self) -> float | None:
        return None if self.first is None else self.first - self.started

    @property
    def usage_tokens(self) -> int | None:
        """The completion tokens as the server's usage counts them (None: not counted)."""
        return None if self.usage is None else self.usage.get("completion_tokens")

    @property
    def tokens(self) -> int:
        """Tokens so far: the server's usage count when it sent one, else the pieces."""
        counted = self.usage_tokens
        return counted if counted is not None else self.pieces

    @property
    def tokens_per_s(self) -> float | None:
        """Tokens after the first (:attr:`tokens`) over the time from the first piece to the
        last; None with fewer than two, or when the pieces came within MIN_RATE_SPAN seconds:
        read in one burst, a rate of them means nothing."""
        count = self.tokens
        if (self.first is None or self.last is None or count < 2
                or self.last - self.first < MIN_RATE_SPAN):
            return None
        return (count - 1) / (self.last - self.first)
