"""The Try it panel of ServeView, kernel side: requests and chats run here, not in the browser.

The front end (try_panel.js) sends ``{"kind": "try", ...}`` (one request), ``{"kind": "detect"}``
(is the server OpenAI-compatible: does ``/v1/models`` answer), ``{"kind": "chat", ...}`` and
``{"kind": "chat_stop"}``. Each runs on a thread through the service's forward (serve_http.py);
answers come back as custom messages (``try_result``, ``chat_piece`` in batches of at most 20 a
second, ``chat_end``) and the detection as the view's ``try_openai`` / ``try_models`` traits.
Everything sent is text: bodies, headers and chat pieces pass through the one sanitiser.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import Any

from ...core.errors import SpecError, TiersError
from ...core.plaintext import printable
from ...serving.httpmodel import parse_headers, view_of
from ...serving.openai_compat import check_messages
from ...serving.status import check_track
from .batcher import LineBatcher

REQUEST_TIMEOUT = 60.0
CHAT_TIMEOUT = 300.0
PIECE_INTERVAL = 0.05  # seconds between two chat_piece messages at most (<= 20 a second)
MAX_TOKENS = 100_000
MAX_TEMPERATURE = 2  # OpenAI's range; vLLM and TGI take the same
#: Characters of one answer the panel shows (and the browser keeps, try_panel.js): past it the
#: chat is stopped and says so; ``svc.chat()`` in a cell reads up to openai_compat.MAX_ANSWER.
MAX_SHOWN = 1_000_000


def _join_parts(parts: list[Sequence[tuple[str, str]]]) -> dict[str, str]:
    """Batched ``(kind, piece)`` pairs -> ``{"text": ..., "reasoning": ...}`` (reasoning only
    when there is some: a reasoning model's thinking, shown apart from the answer)."""
    joined = {"text": "", "reasoning": ""}
    for part in parts:
        for kind, piece in part:
            joined[kind] += piece
    if not joined["reasoning"]:
        del joined["reasoning"]
    return joined


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


class TryPanel:
    """Try it for one view (``view.service``, its traits, ``view.send``)."""

    def __init__(self, view: Any) -> None:
        self.view = view
        self._lock = threading.Lock()
        self._chats: dict[Any, Any] = {}  # chat id -> its ChatStream, while it runs

    def on_message(self, content: dict[str, Any]) -> bool:
        """Handle a Try it message on a thread; False if it is not one."""
        kind = content.get("kind")
        handlers = {"try": self._try, "detect": self._detect, "chat": self._chat}
        if kind == "chat_stop":
            self.stop(content.get("id"))
            return True
        handler = handlers.get(str(kind))
        if handler is None:
            return False
        if self.view.terminal:
            self._refuse(content, f"service {self.view.service_name} is deleted")
            return True
        threading.Thread(target=handler, args=(content,), name=f"jt-try-{kind}", daemon=True).start()
        return True

    def _refuse(self, content: dict[str, Any], why: str) -> None:
        kind = content.get("kind")
        if kind == "try":
            self.view.send({"kind": "try_result", "id": content.get("id"), "error": why})
        elif kind == "chat":
            self.view.send({"kind": "chat_end", "id": content.get("id"), "error": why})
        else:
            self.view.try_note = why

    def _only_ready_pod(self, track: str | None = None) -> str:
        """When no header or forward names who answered: the one ready pod (of ``track``), if
        there is just one (from the view's last status: no request to the cluster); else ""."""
        status = self.view.last_status
        ready = [p.name for p in (status.pods if status else ()) if p.ready and p.phase != "Terminating"
                 and (track is None or not p.track or p.track == track)]
        return f"{ready[0]} (the only ready pod)" if len(ready) == 1 else ""

    # --- one request ---------------------------------------------------------------------------
    def _try(self, content: dict[str, Any]) -> None:
        rid = content.get("id")
        try:
            method, path, kwargs = request_of(content)
            track = track_of(content)
            resp = self.view.service.request(method, path, timeout=REQUEST_TIMEOUT, track=track, **kwargs)
            shown = view_of(resp)
            shown["answered_by"] = _with_track(shown["answered_by"] or self._only_ready_pod(track), track)
            answer: dict[str, Any] = {"kind": "try_result", "id": rid, "response": shown}
        except TiersError as exc:
            answer = {"kind": "try_result", "id": rid, "error": printable(_one_line(exc))}
        except Exception as exc:  # nothing may escape into the comm machinery
            why = printable(f"request failed: {_one_line(exc)}")
            answer = {"kind": "try_result", "id": rid, "error": why}
        self.view.send(answer)

    # --- OpenAI-compatible ---------------------------------------------------------------------
    def _detect(self, _content: dict[str, Any]) -> None:
        self.view.try_note = "asking GET /v1/models…"
        try:
            ids = self.view.service.models(track=track_of(_content))
        except Exception as exc:
            with self.view.hold_sync():
                self.view.try_openai = "no"
                self.view.try_models = []
                self.view.try_note = printable(_one_line(exc))
            return
        with self.view.hold_sync():
            self.view.try_openai = "yes"
            self.view.try_models = list(ids)
            count = len(ids)
            self.view.try_note = f"OpenAI-compatible: {count} model{'s' if count != 1 else ''}"

    def _chat(self, content: dict[str, Any]) -> None:
        cid = content.get("id")
        end: dict[str, Any] = {"kind": "chat_end", "id": cid}
        stream: Any = None

        def send_pieces(joined: dict[str, str], _skipped: int) -> None:  # with the figures so far
            self.view.send({"kind": "chat_piece", "id": cid, **joined, **_figures(stream)})

        batcher: LineBatcher[tuple[str, str]] = LineBatcher(send_pieces, interval=PIECE_INTERVAL,
                                                            max_lines=10**9, join=_join_parts)
        try:
            messages, model, params = chat_of(content)
            track = track_of(content)
            stream = self.view.service.chat(messages, model=model, timeout=CHAT_TIMEOUT, track=track,
                                            **params)
            with self._lock:
                self._chats[cid] = stream
            shown = 0
            for kind, piece in stream.parts():
                text = printable(piece, keep="\n\t")[:MAX_SHOWN - shown]
                shown += len(text)
                batcher.add([(kind, text)])
                if shown >= MAX_SHOWN:
                    stream.close()
                    end["error"] = (f"the answer is longer than {MAX_SHOWN:,} characters: the panel "
                                    "keeps its beginning; svc.chat() in a cell reads more")
                    break
        except TiersError as exc:
            stopped = stream is not None and stream.aborted
            end["error"] = "stopped" if stopped else printable(_one_line(exc))
        except Exception as exc:
            end["error"] = printable(f"chat failed: {_one_line(exc)}")
        finally:
            with self._lock:
                self._chats.pop(cid, None)
            batcher.close()
        if stream is not None:
            answered = stream.answered_by or self._only_ready_pod(stream.track)
            end.update(_figures(stream), answered_by=_with_track(answered, stream.track))
            if stream.finish_reason and stream.finish_reason not in ("stop", "eos_token", "eos"):
                end["finish_reason"] = printable(stream.finish_reason)  # "length": cut at max_tokens
        self.view.send(end)

    def stop(self, cid: Any) -> None:
        """End a running chat early (its connection is closed; it reports ``stopped``)."""
        with self._lock:
            stream = self._chats.get(cid)
        if stream is not None:
            stream.abort()


def _figures(stream: Any) -> dict[str, Any]:
    """Time to the first piece (ms), the rate and the pieces so far of a ChatStream, and the
    server's token counts (``usage``) when it sent them: a piece is one streamed chunk, which is a
    token on vLLM and TGI but need not be, so the panel says "tokens" only from ``usage`` (and
    the rate, ChatStats.tokens_per_s, is of the usage's tokens then, else of the pieces)."""
    if stream is None:
        return {}
    ttft, tps = stream.stats.ttft, stream.stats.tokens_per_s
    return {"ttft_ms": None if ttft is None else round(ttft * 1000, 1),
            "tokens_per_s": None if tps is None else round(tps, 1), "pieces": stream.stats.pieces,
            "usage": stream.stats.usage}


def track_of(content: dict[str, Any]) -> str | None:
    """The track a Try it message asks for: "stable", "canary", or None (either; "" or absent)."""
    return check_track(content.get("track") or None)


def _with_track(answered: str, track: str | None) -> str:
    return f"{answered} ({track})" if answered and track else answered


def request_of(content: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """Method, path and ``svc.request`` keywords from a Try it message (SpecError if bad)."""
    method, path = content.get("method"), content.get("path")
    if not isinstance(method, str) or not isinstance(path, str):
        raise SpecError("request", "a method and a path")
    kwargs: dict[str, Any] = {"headers": parse_headers(str(content.get("headers") or ""))}
    body, kind = content.get("body"), content.get("body_kind")
    if not isinstance(body, str):
        body = ""
    if kind == "json" and body.strip():
        try:
            kwargs["json"] = json.loads(body)
        except ValueError as exc:
            raise SpecError("body", f"not JSON ({exc}); choose text to send it as it is") from None
    elif kind == "text" and body:
        kwargs["body"] = body
    elif kind not in ("json", "text", "none", None):
        raise SpecError("body_kind", f"json, text or none, got {kind!r}")
    return method, path, kwargs


def chat_of(content: dict[str, Any]) -> tuple[list[dict[str, str]], str | None, dict[str, Any]]:
    """Messages, model and parameters from a chat message (SpecError if bad): ``system`` (a
    system prompt put first when not blank), ``temperature`` (0 to 2) and ``max_tokens``; a blank
    or absent parameter is the server's default."""
    model = content.get("model") or None
    params: dict[str, Any] = {}
    max_tokens = content.get("max_tokens")
    if max_tokens not in (None, ""):
        whole = isinstance(max_tokens, int) and not isinstance(max_tokens, bool)
        if not whole or not 0 < max_tokens <= MAX_TOKENS:
            raise SpecError("max_tokens", f"a whole number from 1 to {MAX_TOKENS}, got {max_tokens!r}"[:120])
        params["max_tokens"] = max_tokens
    temperature = content.get("temperature")
    if temperature not in (None, ""):
        number = isinstance(temperature, (int, float)) and not isinstance(temperature, bool)
        if not number or not 0 <= temperature <= MAX_TEMPERATURE:
            raise SpecError("temperature", f"a number from 0 to {MAX_TEMPERATURE}, got {temperature!r}"[:120])
        params["temperature"] = temperature
    if model is not None and not isinstance(model, str):
        raise SpecError("model", f"a model id, got {model!r}"[:120])
    messages = check_messages(content.get("messages"))
    system = content.get("system")
    if system not in (None, ""):
        if not isinstance(system, str):
            raise SpecError("system", f"a system prompt as text, got {type(system).__name__}")
        if system.strip():
            messages = [{"role": "system", "content": system}, *messages]
    return messages, model, params
