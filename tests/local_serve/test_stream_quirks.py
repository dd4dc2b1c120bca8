"""Issue 28 §4: model servers as they really stream. Each quirk of vLLM, llama.cpp, TGI, Ollama
and LiteLLM, produced on request by the test server (tests/openai_server.py) run as a service on
the local serving tier, read through ``svc.chat`` (and the Try it panel's kernel side, and the
load test): a last usage chunk with empty ``choices``, ``:`` keep-alive comments, an in-band
``{"error": ...}`` after HTTP 200, a role-only first chunk, ``finish_reason: "eos_token"``,
``reasoning`` / ``reasoning_content`` pieces, and a server that refuses ``stream_options``."""

from __future__ import annotations

import pytest

from jupyter_tiers.core.errors import TiersError
from jupyter_tiers.engine import serve_http
from jupyter_tiers.local.serve_tier import LocalServeTier
from jupyter_tiers.serving.openai_compat import MIN_RATE_SPAN
from tests.helpers import wait_for

from .conftest import GUARD
from .test_try_it import RecordingView, serve

ANSWER = ["echo: ", "one ", "two ", "three"]
PROMPT = "one two three"


def test_usage_chunk_with_empty_choices_fills_tokens(tier: LocalServeTier) -> None:
    svc = serve(tier, "usage")
    # Asked for (stream_options.include_usage, which svc.chat sends), and sent unasked (llama.cpp).
    for marker in ("", " [usage]"):
        stream = svc.chat(PROMPT + marker)
        got = list(stream)
        assert "".join(got) == "echo: " + PROMPT + marker
        assert stream.stats.usage_tokens == len(got) and stream.stats.tokens == len(got)
        assert stream.finish_reason is None
        # A rate only over a span long enough to be one (the burst rule: these few pieces may
        # well arrive in one read, and then there is none).
        span = (stream.stats.last or 0) - (stream.stats.first or 0)
        assert (stream.stats.tokens_per_s is not None) == (span >= MIN_RATE_SPAN), span
    # Spread out ([slow]: 0.2 s between answer pieces, so never one burst), the rate is of the
    # usage's tokens, which count the reasoning's 5 tokens in its 2 pieces too.
    stream = svc.chat(PROMPT + " [slow] [reasoning]")
    assert len(list(stream.parts())) == 8
    stats = stream.stats
    assert stats.pieces == 8 and stats.usage_tokens == 6 + 5 and stats.last and stats.first
    assert stats.tokens_per_s == (11 - 1) / (stats.last - stats.first)


def test_keepalive_comments_never_show_as_text(tier: LocalServeTier) -> None:
    svc = serve(tier, "keepalive")
    stream = svc.chat(PROMPT + " [keepalive]")
    assert list(stream) == [*ANSWER[:-1], "three ", "[keepalive]"]
    assert ":" not in stream.text.replace("echo:", "") and "keep-alive" not in stream.text


def test_an_in_band_error_after_http_200_ends_the_stream_with_it(tier: LocalServeTier) -> None:
    svc = serve(tier, "inband")
    stream = svc.chat(PROMPT + " [inband-error]")
    got = []
    with pytest.raises(TiersError) as err:
        for piece in stream:
            got.append(piece)
    assert got == ANSWER[:2]  # what came before the error, then the error: not an empty success
    assert str(err.value) == "chat: the server sent an error: the engine died: CUDA error <b>x</b>"
    with pytest.raises(TiersError, match="the engine died"):
        list(svc.chat("x [inband-error]", stream=True))


def test_role_only_first_chunk_and_eos_token_finish(tier: LocalServeTier) -> None:
    svc = serve(tier, "roleeos")
    stream = svc.chat(PROMPT + " [role] [eos]")
    got = list(stream)
    assert got[0] == "echo: " and "".join(got) == "echo: " + PROMPT + " [role] [eos]"
    assert stream.stats.pieces == len(got)  # the role-only and the finish chunks are no pieces
    assert stream.finish_reason == "eos_token"


def test_reasoning_is_kept_apart_from_the_answer(tier: LocalServeTier) -> None:
    svc = serve(tier, "reasoner")
    stream = svc.chat(PROMPT + " [reasoning]")
    parts = list(stream.parts())
    assert parts[:2] == [("reasoning", "thinking about it"), ("reasoning", " still thinking")]
    assert all(kind == "text" for kind, _ in parts[2:])
    assert stream.text == "echo: " + PROMPT + " [reasoning]"
    assert stream.reasoning == "thinking about it still thinking"
    # The usage counts the reasoning's five tokens too: tokens/s follows the server's count.
    assert stream.stats.usage_tokens == len(parts) - 2 + 5
    assert stream.stats.tokens == stream.stats.usage_tokens
    # Iterating gives the answer only.
    plain = svc.chat(PROMPT + " [reasoning]")
    assert "".join(plain) == "echo: " + PROMPT + " [reasoning]" and plain.reasoning.startswith("thinking")


def test_every_quirk_at_once(tier: LocalServeTier) -> None:
    svc = serve(tier, "quirky")
    stream = svc.chat(PROMPT + " [quirks]")
    assert "".join(stream) == "echo: " + PROMPT + " [quirks]"
    assert stream.reasoning == "thinking about it still thinking" and stream.finish_reason == "eos_token"
    assert stream.stats.usage_tokens == 5 + 5


def test_a_server_refusing_stream_options_is_asked_again_without(tier: LocalServeTier) -> None:
    svc = serve(tier, "oldserver")
    key = svc.record.key
    serve_http._no_stream_options.discard(key)
    stream = svc.chat(PROMPT + " [no-stream-options]")
    assert "".join(stream) == "echo: " + PROMPT + " [no-stream-options]"
    assert stream.stats.usage_tokens is None  # no usage without stream_options: the pieces count
    assert stream.stats.tokens == stream.stats.pieces
    assert key in serve_http._no_stream_options  # not sent to this service again
    again = svc.chat("more [no-stream-options]")
    assert "".join(again) == "echo: more [no-stream-options]"
    # Another error is shown as it is, and does not count as a refusal of stream_options.
    serve_http._no_stream_options.discard(key)
    with pytest.raises(TiersError, match="HTTP 404: The model `nope` does not exist"):
        list(svc.chat("x", model="nope"))
    assert key not in serve_http._no_stream_options


def test_models_with_llamacpp_extra_keys(tier: LocalServeTier) -> None:
    assert serve(tier, "models").models() == ["tiny-echo"]


def test_try_it_survives_every_quirk(tier: LocalServeTier) -> None:
    view = RecordingView(serve(tier, "quirkpanel"))
    try:
        view.front({"kind": "chat", "id": 1, "messages": [{"role": "user", "content": "a b [quirks]"}]})
        end = wait_for(lambda: view.of_kind("chat_end", 1), "the chat's end", timeout=GUARD)[0]
        pieces = view.of_kind("chat_piece", 1)
        assert "".join(m["text"] for m in pieces) == "echo: a b [quirks]"
        assert "".join(m.get("reasoning", "") for m in pieces) == "thinking about it still thinking"
        assert "error" not in end and "finish_reason" not in end  # eos_token is a normal end
        # The usage counts the reasoning's 5 tokens; the pieces are chunks (2 of reasoning).
        assert end["usage"]["completion_tokens"] == 4 + 5 and end["pieces"] == 4 + 2
        failing = [{"role": "user", "content": "a b c [inband-error]"}]
        view.front({"kind": "chat", "id": 2, "messages": failing})
        failed = wait_for(lambda: view.of_kind("chat_end", 2), "the failed chat's end", timeout=GUARD)[0]
        assert failed["error"] == "chat: the server sent an error: the engine died: CUDA error <b>x</b>"
        assert "".join(m["text"] for m in view.of_kind("chat_piece", 2)) == "echo: a "
    finally:
        view.close()


def test_load_test_counts_an_in_band_error_as_failed(tier: LocalServeTier) -> None:
    svc = serve(tier, "loadquirks")
    body = {"messages": [{"role": "user", "content": "x y z [inband-error]"}], "stream": True}
    svc.load_test(rps=4, seconds=1, concurrency=4,
                  request={"method": "POST", "path": "/v1/chat/completions", "json": body})
    rows = svc.last_load_test.records()
    assert len(rows) == 4 and all(r["status"] == 200 for r in rows)
    assert all(r["error"] == "error in the stream after HTTP 200: the engine died: CUDA error <b>x</b>"
               for r in rows), rows
    assert svc.last_load_test.summary()["errors"] == 4
    ok = {"messages": [{"role": "user", "content": "x y z [quirks]"}], "stream": True}
    svc.load_test(rps=4, seconds=1, concurrency=4,
                  request={"method": "POST", "path": "/v1/chat/completions", "json": ok})
    assert [r["error"] for r in svc.last_load_test.records()] == [None] * 4
