#!/usr/bin/env python3
"""Writes the Responses upstream stream fixtures of tests/data/streams/ (responses_*.sse and
their whole replies, *.reply.json): docs/dev/protocols.md C.3's validated stream as it is, and five
streams built to C.3's grammar (reasoning + multi-byte text + parallel calls over CRLF; an
incomplete reply; items that arrive whole over bare CR; a failure; a truncated stream).
Usage: python3 scripts/make_responses_stream_fixtures.py [PROTOCOLS_MD]"""

import json
import sys
from pathlib import Path

D = Path(__file__).resolve().parent.parent / "tests" / "data" / "streams"
DOC = Path(__file__).resolve().parent.parent / "docs/dev/protocols.md"
doc = Path(sys.argv[1] if len(sys.argv) > 1 else DOC).read_text()
i = doc.index("**[validated] A text message, then a function call**")
block = doc[doc.index("```\n", i) + 4: doc.index("```", doc.index("```\n", i) + 4)]
(D / "responses_validated_text_tool.sse").write_text(block)
last = [l for l in block.splitlines() if l.startswith("data: ")][-1]
(D / "responses_validated_text_tool.reply.json").write_text(json.dumps(json.loads(last[6:])["response"], indent=1, ensure_ascii=False) + "\n")

def sse(events, nl="\n"):
    out = []
    for n, e in enumerate(events):
        e = {"type": e["type"], "sequence_number": n, **{k: v for k, v in e.items() if k != "type"}}
        out.append(f"event: {e['type']}{nl}data: {json.dumps(e, ensure_ascii=False, separators=(',', ':'))}{nl}{nl}")
    return "".join(out)

def resp(rid, status, output, usage=None, model="gpt-5.1-codex", **extra):
    r = {"id": rid, "object": "response", "created_at": 1767225600, "status": status, "model": model, "output": output,
         "parallel_tool_calls": True, "tool_choice": "auto", "tools": []}
    r.update(extra)
    if usage is not None:
        r["usage"] = usage
    return r

def msg_events(oi, iid, pieces):
    text = "".join(pieces)
    part = {"type": "output_text", "annotations": [], "text": ""}
    ev = [{"type": "response.output_item.added", "output_index": oi, "item": {"id": iid, "type": "message", "status": "in_progress", "content": [], "role": "assistant"}},
          {"type": "response.content_part.added", "item_id": iid, "output_index": oi, "content_index": 0, "part": part}]
    ev += [{"type": "response.output_text.delta", "item_id": iid, "output_index": oi, "content_index": 0, "delta": p, "logprobs": []} for p in pieces]
    done_item = {"id": iid, "type": "message", "status": "completed", "content": [{"type": "output_text", "annotations": [], "text": text}], "role": "assistant"}
    ev += [{"type": "response.output_text.done", "item_id": iid, "output_index": oi, "content_index": 0, "text": text, "logprobs": []},
           {"type": "response.content_part.done", "item_id": iid, "output_index": oi, "content_index": 0, "part": {**part, "text": text}},
           {"type": "response.output_item.done", "output_index": oi, "item": done_item}]
    return ev, done_item

def call_events(oi, iid, call_id, name, pieces):
    args = "".join(pieces)
    ev = [{"type": "response.output_item.added", "output_index": oi, "item": {"id": iid, "type": "function_call", "status": "in_progress", "arguments": "", "call_id": call_id, "name": name}}]
    ev += [{"type": "response.function_call_arguments.delta", "item_id": iid, "output_index": oi, "delta": p} for p in pieces]
    done_item = {"id": iid, "type": "function_call", "status": "completed", "arguments": args, "call_id": call_id, "name": name}
    ev += [{"type": "response.function_call_arguments.done", "item_id": iid, "output_index": oi, "arguments": args},
           {"type": "response.output_item.done", "output_index": oi, "item": done_item}]
    return ev, done_item

def write(name, events, final, nl="\n"):
    (D / f"{name}.sse").write_bytes(sse(events, nl).encode())
    if final is not None:
        (D / f"{name}.reply.json").write_text(json.dumps(final, indent=1, ensure_ascii=False) + "\n")

# 2. reasoning, then text with multi-byte characters, then two parallel calls (one without arguments); CRLF framing
rid = "resp_0a7c2e11b4d5f6a7"
start = resp(rid, "in_progress", [])
rs = {"id": "rs_0a7c2e11b4d5f6a8", "type": "reasoning", "summary": [], "encrypted_content": "gAAAAB-opaque"}
rs_done = {**rs, "summary": [{"type": "summary_text", "text": "Need the weather."}]}
ev = [{"type": "response.created", "response": start}, {"type": "response.in_progress", "response": start},
      {"type": "response.output_item.added", "output_index": 0, "item": rs},
      {"type": "response.reasoning_summary_part.added", "item_id": rs["id"], "output_index": 0, "summary_index": 0, "part": {"type": "summary_text", "text": ""}},
      {"type": "response.reasoning_summary_text.delta", "item_id": rs["id"], "output_index": 0, "summary_index": 0, "delta": "Need the weather."},
      {"type": "response.reasoning_summary_text.done", "item_id": rs["id"], "output_index": 0, "summary_index": 0, "text": "Need the weather."},
      {"type": "response.reasoning_summary_part.done", "item_id": rs["id"], "output_index": 0, "summary_index": 0, "part": {"type": "summary_text", "text": "Need the weather."}},
      {"type": "response.output_item.done", "output_index": 0, "item": rs_done}]
m, mi = msg_events(1, "msg_0a7c2e11b4d5f6a9", ["Checking Zürich ", "and Tōkyō 🌦", "."])
c1, ci1 = call_events(2, "fc_0a7c2e11b4d5f6b0", "call_W1x2Y3z4A5b6", "get_weather", ['{"city":', '"Zürich"}'])
c2, ci2 = call_events(3, "fc_0a7c2e11b4d5f6b1", "call_C7d8E9f0G1h2", "get_time", [])
usage = {"input_tokens": 2310, "input_tokens_details": {"cached_tokens": 1792}, "output_tokens": 96, "output_tokens_details": {"reasoning_tokens": 64}, "total_tokens": 2406}
final = resp(rid, "completed", [rs_done, mi, ci1, ci2], usage)
write("responses_reasoning_parallel_tools", ev + m + c1 + c2 + [{"type": "response.completed", "response": final}], final, "\r\n")

# 3. incomplete: max_output_tokens
rid = "resp_1b8d3f22c5e6a7b8"
start = resp(rid, "in_progress", [])
m, mi = msg_events(0, "msg_1b8d3f22c5e6a7b9", ["The answer is", " long and"])
mi_inc = {**mi, "status": "incomplete"}
m[-1]["item"] = mi_inc
final = resp(rid, "incomplete", [mi_inc], {"input_tokens": 40, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 16, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 56}, incomplete_details={"reason": "max_output_tokens"})
write("responses_incomplete_max_tokens", [{"type": "response.created", "response": start}, {"type": "response.in_progress", "response": start}] + m + [{"type": "response.incomplete", "response": final}], final)

# 4. items that arrive whole (added, then done with their content; no deltas), bare \r framing
rid = "resp_2c9e4a33d6f7b8c9"
start = resp(rid, "in_progress", [])
mi = {"id": "msg_2c9e4a33d6f7b8d0", "type": "message", "status": "completed", "content": [{"type": "output_text", "annotations": [], "text": "Running it."}], "role": "assistant"}
ci = {"id": "fc_2c9e4a33d6f7b8d1", "type": "function_call", "status": "completed", "arguments": "{\"command\":\"ls\"}", "call_id": "call_R5s6T7u8V9w0", "name": "shell"}
ev = [{"type": "response.created", "response": start},
      {"type": "response.output_item.added", "output_index": 0, "item": {**mi, "status": "in_progress", "content": []}},
      {"type": "response.output_item.done", "output_index": 0, "item": mi},
      {"type": "response.output_item.added", "output_index": 1, "item": {**ci, "status": "in_progress", "arguments": ""}},
      {"type": "response.output_item.done", "output_index": 1, "item": ci}]
final = resp(rid, "completed", [mi, ci], {"input_tokens": 120, "output_tokens": 9, "total_tokens": 129})
write("responses_whole_items", ev + [{"type": "response.completed", "response": final}], final, "\r")

# 5. failed: context overflow after some text
rid = "resp_3d0f5b44e7a8c9d0"
start = resp(rid, "in_progress", [])
m, _ = msg_events(0, "msg_3d0f5b44e7a8c9d1", ["Partial"])
failed = resp(rid, "failed", [], None, error={"code": "context_length_exceeded", "message": "Your input exceeds the context window of this model."})
write("responses_failed_context", [{"type": "response.created", "response": start}, {"type": "response.in_progress", "response": start}] + m[:3] + [{"type": "response.failed", "response": failed}], None)

# 6. truncated mid-arguments (no response.completed)
rid = "resp_4e1a6c55f8b9d0e1"
start = resp(rid, "in_progress", [])
c, _ = call_events(0, "fc_4e1a6c55f8b9d0e2", "call_K1l2M3n4O5p6", "shell", ['{"command":', '"ls'])
write("responses_truncated", [{"type": "response.created", "response": start}, {"type": "response.in_progress", "response": start}] + c[:2], None)
