"""The eight fidelity defects of issue 9 §4 (cases taken from other projects' test suites),
each with a small input of its own."""

from __future__ import annotations

import json

from tokunseba import translate


def sse(*chunks: dict) -> bytes:
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"


def chunk(delta: dict | None = None, finish: str | None = None, **choice) -> dict:
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish, **choice}]}


def stream(data: bytes, client: str = "anthropic"):
    t = translate.stream("openai", client, created=1)
    out = t.feed(data) + t.close()
    return out, t.report


def anthropic_blocks(out: bytes) -> list[dict]:
    blocks: dict[int, dict] = {}
    for line in out.decode().splitlines():
        if line.startswith("data: "):
            d = json.loads(line[6:])
            if d["type"] == "content_block_start":
                blocks[d["index"]] = dict(d["content_block"])
            elif d["type"] == "content_block_delta" and d["delta"]["type"] == "input_json_delta":
                blocks[d["index"]]["args"] = blocks[d["index"]].get("args", "") + d["delta"]["partial_json"]
    return [blocks[i] for i in sorted(blocks)]


def test_defect1_non_text_parts_of_a_whole_chat_reply_are_dropped_and_recorded():
    body = {"id": "c1", "model": "m", "choices": [{"index": 0, "finish_reason": "stop", "message": {
        "role": "assistant", "content": [{"type": "text", "text": "Here: "},
                                         {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                                         {"type": "mystery", "x": 1}]}}]}
    rep = translate.reply("openai", "anthropic", json.dumps(body).encode())
    assert json.loads(rep.body)["content"] == [{"type": "text", "text": "Here: "}]
    assert rep.dropped == ["choices[0].message.content[1]", "choices[0].message.content[2]"]
    # all unknown: an empty reply is still explained
    body["choices"][0]["message"]["content"] = [{"type": "mystery"}]
    rep = translate.reply("openai", "anthropic", json.dumps(body).encode())
    assert json.loads(rep.body)["content"] == [] and rep.dropped == ["choices[0].message.content[0]"]


def test_defect2_chat_stream_delta_keys_not_read_are_recorded():
    data = sse(chunk({"role": "assistant", "reasoning_content": {"text": "hmm"}}),
               chunk({"reasoning_content": {"signature": "sig"}}),
               chunk({"thinking_blocks": [{"type": "thinking", "thinking": "hmm", "signature": "sig"}]}),
               chunk({"content": "ok"}), chunk(finish="stop"))
    out, report = stream(data)
    assert report.dropped == ["choices[0].delta.reasoning_content", "choices[0].delta.thinking_blocks"]
    assert [b["type"] for b in anthropic_blocks(out)] == ["text"]
    assert "hmm" not in out.decode() and "sig" not in out.decode()


def test_defect3_choice_level_logprobs_of_a_chat_stream_are_recorded():
    lp = {"content": [{"token": "ok", "logprob": -0.1, "bytes": [111, 107], "top_logprobs": []}]}
    data = sse(chunk({"role": "assistant", "content": "ok"}, logprobs=lp), chunk(finish="stop", logprobs=None))
    for client in ("anthropic", "openai-responses"):
        _, report = stream(data, client)
        assert report.dropped == ["choices[0].logprobs"], client


def test_defect4_a_tool_output_after_a_user_message_moves_back_next_to_its_call():
    body = {"model": "m", "input": [
        {"type": "message", "role": "user", "content": "run it"},
        {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{}"},
        {"type": "message", "role": "user", "content": "and hurry"},
        {"type": "function_call_output", "call_id": "c1", "output": "done"}]}
    rt = translate.request("openai-responses", "openai", body)
    assert [(m["role"], m.get("tool_call_id")) for m in rt.body["messages"]] == [
        ("user", None), ("assistant", None), ("tool", "c1"), ("user", None)]
    assert rt.body["messages"][3]["content"] == "and hurry"  # never dropped
    assert rt.converted == ["input[3] moved next to its function_call (input[1]): a tool result must follow its call"]
    a = translate.request("openai-responses", "anthropic", body, max_tokens=10).body
    assert [m["role"] for m in a["messages"]] == ["user", "assistant", "user"]
    assert [b["type"] for b in a["messages"][2]["content"]] == ["tool_result", "text"]


def test_defect5_two_calls_in_one_delta_without_index_or_id_stay_two():
    data = sse(chunk({"role": "assistant", "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}},
        {"type": "function", "function": {"name": "get_time", "arguments": '{"tz":"CET"}'}}]}),
        chunk(finish="tool_calls"))
    out, report = stream(data)
    blocks = anthropic_blocks(out)
    assert [(b["name"], json.loads(b["args"])) for b in blocks] == [("get_weather", {"city": "Paris"}),
                                                                     ("get_time", {"tz": "CET"})]
    assert len({b["id"] for b in blocks}) == 2
    assert any(w.startswith("id_synthesized") for w in report.warnings)


def test_defect6_a_pdf_data_url_in_an_image_part_becomes_an_anthropic_document():
    body = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:application/pdf;base64,JVBERi0x"}}]}]}
    rt = translate.request("openai", "anthropic", body)
    assert rt.body["messages"][0]["content"] == [
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0x"}}]
    assert rt.converted == ["messages[0].content[0] -> document (application/pdf is no image)"]


def test_defect7_a_chat_reply_without_id_gets_a_minted_id_recorded():
    body = {"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hi"}}]}
    rep = translate.reply("openai", "anthropic", json.dumps(body).encode(), created=1767225600)
    doc = json.loads(rep.body)
    assert doc["id"] == "msg_tk_1767225600"
    assert "id_synthesized: id (the upstream sent no message id; Anthropic requires one)" in rep.warnings
    # the same reply streamed gets the same id
    out, report = stream(sse({k: v for k, v in chunk({"content": "hi"}).items() if k != "id"}, chunk(finish="stop")))
    start = json.loads(out.decode().split("data: ", 2)[1].split("\n")[0])
    assert start["message"]["id"] == "msg_tk_1" and any(w.startswith("id_synthesized: id") for w in report.warnings)


def test_defect8_cache_counts_under_anthropic_names_are_read():
    usage = {"prompt_tokens": 1200, "completion_tokens": 10, "total_tokens": 1210,
             "cache_creation_input_tokens": 200, "cache_read_input_tokens": 900}
    body = {"id": "c1", "model": "m", "usage": usage,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hi"}}]}
    rep = translate.reply("openai", "anthropic", json.dumps(body).encode())
    # prompt_tokens counts the cache (OpenAI's definition): Anthropic's input does not
    assert rep.client_usage == {"input_tokens": 100, "cache_creation_input_tokens": 200,
                                "cache_read_input_tokens": 900, "output_tokens": 10}
    assert rep.usage.fields()["cache_write"] == 200 and rep.usage.fields()["cache_read"] == 900
    body["usage"] = {"prompt_tokens": 1200, "completion_tokens": 10,
                     "prompt_tokens_details": {"cached_tokens": 900, "cache_write_tokens": 200}}
    rep = translate.reply("openai", "openai-responses", json.dumps(body).encode())
    assert rep.client_usage["input_tokens_details"] == {"cached_tokens": 900, "cache_write_tokens": 200}
    out, _ = stream(sse(chunk({"content": "hi"}), chunk(finish="stop") | {"usage": usage}))
    assert b'"cache_read_input_tokens":900' in out and b'"input_tokens":100' in out
