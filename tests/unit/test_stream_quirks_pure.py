"""serving.openai_compat's pure half of issue 28 §4: the chunks real OpenAI-compatible servers
stream (vLLM, llama.cpp, TGI, Ollama, LiteLLM) read into ChunkParts, an in-band error found in a
stream's bytes, tokens/s from a usage count, and the models list's shapes; fuzzed."""

from __future__ import annotations

import json
import random

from jupyter_tiers.serving.openai_compat import (
    ChatStats,
    ChunkParts,
    StreamErrorScan,
    answer_parts,
    chunk_parts,
    model_ids,
)


def chunk(choices: list[dict[str, object]], **extra: object) -> str:
    return json.dumps({"id": "c", "object": "chat.completion.chunk", "model": "m", "choices": choices,
                       **extra})


def test_a_final_usage_chunk_with_empty_choices() -> None:
    counts = {"prompt_tokens": 5, "completion_tokens": 17, "total_tokens": 22}
    assert chunk_parts(chunk([], usage=counts)) == ChunkParts(usage=counts)
    # vLLM puts "usage": null on every other chunk when include_usage is set.
    assert chunk_parts(chunk([{"index": 0, "delta": {"content": "a"}}], usage=None)) == ChunkParts(text="a")
    assert chunk_parts(chunk([], usage={"completion_tokens": True})) == ChunkParts()
    assert chunk_parts(chunk([], usage={"completion_tokens": -1})) == ChunkParts()
    assert chunk_parts(chunk([], usage={"prompt_tokens": 5})) == ChunkParts(usage={"prompt_tokens": 5})


def test_a_role_only_first_chunk_gives_nothing() -> None:
    role = chunk([{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}])
    assert chunk_parts(role) == ChunkParts()
    assert chunk_parts(chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}}])) == ChunkParts()


def test_finish_reasons_of_any_server() -> None:
    for reason in ("stop", "length", "eos_token", "tool_calls"):
        got = chunk_parts(chunk([{"index": 0, "delta": {}, "finish_reason": reason}]))
        assert got == ChunkParts(finish_reason=reason)
    odd = chunk_parts(chunk([{"index": 0, "delta": {}, "finish_reason": "\x1b[31m" + "x" * 100}]))
    assert odd is not None and odd.finish_reason is not None
    assert "\x1b" not in odd.finish_reason and len(odd.finish_reason) == 60


def test_reasoning_fields_are_kept_apart() -> None:
    # vLLM and LiteLLM: reasoning_content; Ollama and OpenRouter: reasoning.
    vllm = chunk([{"index": 0, "delta": {"reasoning_content": "hmm"}}])
    assert chunk_parts(vllm) == ChunkParts(reasoning="hmm")
    assert chunk_parts(chunk([{"index": 0, "delta": {"reasoning": "so"}}])) == ChunkParts(reasoning="so")
    delta = {"content": "A", "reasoning_content": None, "reasoning": "r"}
    both = chunk_parts(chunk([{"index": 0, "delta": delta}]))
    assert both == ChunkParts(text="A", reasoning="r")
    whole = answer_parts({"choices": [{"message": {"content": "A", "reasoning_content": "think"},
                                       "finish_reason": "stop"}], "usage": {"completion_tokens": 9}})
    assert whole == ChunkParts(text="A", reasoning="think", finish_reason="stop",
                               usage={"completion_tokens": 9})


def test_an_in_band_error_chunk() -> None:
    got = chunk_parts('{"error": {"message": "the engine died", "type": "InternalServerError", "code": 500}}')
    assert got == ChunkParts(error="the engine died")
    assert chunk_parts('{"error": "overloaded"}') == ChunkParts(error="overloaded")
    assert chunk_parts('{"error": {}}') == ChunkParts()  # an empty error is no error
    assert answer_parts({"error": {"message": "bad\nthing"}}) == ChunkParts(error="bad thing")
    assert chunk_parts(" [DONE]") is None and chunk_parts("not json") == ChunkParts()


def test_stream_error_scan_finds_the_error_across_chunks() -> None:
    stream = (b": keep-alive\n\ndata: " + chunk([{"index": 0, "delta": {"content": "error"}}]).encode()
              + b'\n\n:\n\ndata: {"error": {"message": "out of KV cache"}}\n\n')
    for cut in range(0, len(stream), 7):
        scan = StreamErrorScan()
        scan.feed(stream[:cut])
        scan.feed(stream[cut:])
        assert scan.error == "out of KV cache"
    named = StreamErrorScan()
    named.feed(b'event: error\ndata: {"message": "rate limited"}\n\n')
    assert named.error == "rate limited"
    clean = StreamErrorScan()
    clean.feed(stream.replace(b'"error": {', b'"other": {'))
    assert clean.error is None


def test_tokens_per_s_from_the_usage_count() -> None:
    stats = ChatStats(started=0.0)
    for now in (1.0, 2.0, 3.0):
        stats.add(now)
    assert stats.tokens == 3 and stats.tokens_per_s == 1.0  # (3 - 1) pieces over 2 s
    stats.usage = {"prompt_tokens": 4, "completion_tokens": 9}  # a server sending several tokens a
    assert stats.usage_tokens == 9 and stats.tokens == 9 and stats.tokens_per_s == 4.0  # chunk says so
    stats.usage = {"prompt_tokens": 4}  # counts without the answer's: the pieces count
    assert stats.usage_tokens is None and stats.tokens == 3
    burst = ChatStats(started=0.0, usage={"completion_tokens": 50})
    for now in (1.0, 1.0001):  # read in one go: no rate, whatever the usage says
        burst.add(now)
    assert burst.tokens == 50 and burst.tokens_per_s is None


def test_models_list_shapes() -> None:
    llamacpp = {"object": "list", "data": [{"id": "q4.gguf", "object": "model"}],
                "models": [{"name": "q4.gguf", "model": "q4.gguf"}]}
    assert model_ids(llamacpp) == ("q4.gguf",)
    assert model_ids({"object": "model", "id": "tgi", "owned_by": "hf"}) == ("tgi",)
    assert model_ids({"object": "list", "data": []}) == ()
    assert model_ids({"data": [{"id": "a"}, {"name": "b"}]}) == ("a",)
    assert model_ids({"data": [{"name": "b"}]}) is None and model_ids({"object": "model"}) is None


def test_fuzz_chunk_parts_and_the_scan() -> None:
    rng = random.Random(2028)
    samples = [chunk([], usage={"completion_tokens": 3}),
               chunk([{"index": 0, "delta": {"role": "assistant"}}]),
               chunk([{"index": 0, "delta": {"reasoning": "r", "content": "c"},
                       "finish_reason": "eos_token"}]),
               '{"error": {"message": "x"}}', "[DONE]", '{"choices": [null]}', '{"choices": "x"}',
               '{"usage": [1]}', "{}", "[]", "null", '"text"']
    for _ in range(4000):
        base = rng.choice(samples)
        if rng.random() < 0.6:
            cut = rng.randrange(len(base) + 1)
            alphabet = '{}[]":,0123456789abcdeflnrtu \\\x00é'
            noise = "".join(rng.choice(alphabet) for _ in range(rng.randrange(6)))
            base = base[:cut] + noise + base[cut + rng.randrange(3):]
        got = chunk_parts(base)
        assert got is None or isinstance(got, ChunkParts)
        if got is not None:
            assert isinstance(got.text, str) and isinstance(got.reasoning, str)
            assert got.usage is None or all(type(v) is int and v >= 0 for v in got.usage.values())
        scan = StreamErrorScan()
        end = rng.choice([b"\n\n", b"\r\n\r\n", b"\n", b""])
        raw = b"data: " + base.encode("utf-8", "surrogatepass") + end
        pos = 0
        while pos < len(raw):
            step = rng.randrange(1, 9)
            scan.feed(raw[pos:pos + step])
            pos += step
        assert scan.error is None or ("\n" not in scan.error and len(scan.error) <= 500)
