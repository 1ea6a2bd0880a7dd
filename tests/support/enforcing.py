"""Scripted upstreams that enforce each provider's documented rule on reasoning state in a
tool loop (responders for ``Upstream.responder``), and answer a short tool loop themselves.

- ``DeepSeekChat``: DeepSeek's thinking mode (api-docs.deepseek.com, "Thinking Mode" / tool
  calls): every assistant message with ``tool_calls`` must come back with the
  ``reasoning_content`` the model wrote for it, else 400 "The reasoning_content in the
  thinking mode must be passed back to the API." Reasoning it did not write is rejected too.
- ``AnthropicThinking``: with ``thinking`` enabled, the last assistant message, when it holds
  ``tool_use``, must start with a ``thinking`` / ``redacted_thinking`` block, and every
  thinking block's signature must be one this server issued for that very text.
- ``GeminiSignatures``: each ``functionCall`` it made comes back with the ``thoughtSignature``
  it issued; a real signature it did not issue is a 400; the documented skip value is
  accepted and counted (Google accepts it with degraded quality).

Each answers ``tool_turns`` tool calls (``call_…01``, ``…02``, …, the first declared tool, a
``command`` argument), then a final text; streamed when the request asks.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading

from tests.support.upstream import Recorded, Reply

DEEPSEEK_400 = "The reasoning_content in the thinking mode must be passed back to the API."


# a client's shell tool -> how its arguments name the command (real clients' own tools)
SHELL_TOOLS = {"Bash": lambda c: {"command": c, "description": "Run a step"},  # Claude Code
               "run_shell_command": lambda c: {"command": c},  # Gemini CLI
               "exec_command": lambda c: {"cmd": c},  # Codex
               "shell": lambda c: {"command": ["bash", "-lc", c]}}  # older Codex


def shell_call(names: list[str], command: str) -> tuple[str, dict]:
    """The client's shell tool if it declares one (else its first tool), with ``command``."""
    name = next((n for n in SHELL_TOOLS if n in names), names[0])
    return name, SHELL_TOOLS.get(name, lambda c: {"command": c})(command)


def _sse(events: list[dict], named: bool = False, done: bool = False) -> Reply:
    pieces = []
    for e in events:
        head = f"event: {e['type']}\n".encode() if named else b""
        pieces.append(head + b"data: " + json.dumps(e).encode() + b"\n\n")
    if done:
        pieces.append(b"data: [DONE]\n\n")
    return Reply.sse(pieces)


class _Enforcer:
    def __init__(self, tool_turns: int = 3) -> None:
        self.tool_turns = tool_turns
        self.lock = threading.Lock()
        self.rejected: list[str] = []  # the messages of the 400s answered
        self.answered = 0

    def reject(self, message: str, body: dict | None = None) -> Reply:
        with self.lock:
            self.rejected.append(message)
        return Reply.json(body or {"error": {"message": message, "type": "invalid_request_error",
                                             "code": "invalid_request_error"}}, 400)


class DeepSeekChat(_Enforcer):
    def __init__(self, tool_turns: int = 3, field: str = "reasoning_content", model: str = "deepseek-reasoner") -> None:
        super().__init__(tool_turns)
        self.field, self.model = field, model
        self.issued: dict[str, str] = {}  # call id -> the reasoning written with it

    def __call__(self, rec: Recorded) -> Reply:
        body = rec.json()
        msgs = body.get("messages") or []
        for i, m in enumerate(msgs):
            if m.get("role") == "assistant" and m.get("tool_calls"):
                rc = m.get(self.field)
                if not rc:
                    return self.reject(DEEPSEEK_400)
                cid = m["tool_calls"][0]["id"]
                if self.issued.get(cid) != rc:
                    return self.reject(f"messages[{i}].{self.field} is not what this model wrote for {cid}")
        n = sum(1 for m in msgs if m.get("role") == "tool")
        self.answered += 1
        reasoning = f"Step {n + 1}: the user wants a command run; thinking it over (ds-thought-{n + 1})."
        if not body.get("tools"):  # a side request (a client's title or summary): a plain answer
            text, finish, call = "Loop test", "stop", None
        elif n < self.tool_turns:
            cid = f"call_ds{n + 1:02d}"
            with self.lock:
                self.issued[cid] = reasoning
            tool, args = shell_call([t["function"]["name"] for t in body["tools"]], f"echo step{n + 1}")
            call = {"id": cid, "type": "function", "function": {"name": tool, "arguments": json.dumps(args)}}
            text, finish = "", "tool_calls"
        else:
            call, text, finish = None, f"All {n} steps done.", "stop"
        usage = {"prompt_tokens": 50 + n, "completion_tokens": 20, "total_tokens": 70 + n}
        if not body.get("stream"):
            msg = {"role": "assistant", "content": text or None, self.field: reasoning}
            if call:
                msg["tool_calls"] = [call]
            return Reply.json({"id": f"ds-{self.answered}", "object": "chat.completion", "created": 1,
                               "model": self.model, "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
                               "usage": usage})
        base = {"id": f"ds-{self.answered}", "object": "chat.completion.chunk", "created": 1, "model": self.model}
        half = len(reasoning) // 2
        chunks = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": None,
                                                              self.field: reasoning[:half]}, "finish_reason": None}]},
                  {**base, "choices": [{"index": 0, "delta": {self.field: reasoning[half:]}, "finish_reason": None}]}]
        if call:
            args = call["function"]["arguments"]
            chunks.append({**base, "choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": 0, "id": call["id"], "type": "function",
                 "function": {"name": call["function"]["name"], "arguments": args[:5]}}]}, "finish_reason": None}]})
            chunks.append({**base, "choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": 0, "function": {"arguments": args[5:]}}]}, "finish_reason": None}]})
        else:
            chunks.append({**base, "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]})
        chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        chunks.append({**base, "choices": [], "usage": usage})
        return _sse(chunks, done=True)


class AnthropicThinking(_Enforcer):
    KEY = b"scripted-anthropic-signing-key"

    def __init__(self, tool_turns: int = 3, model: str = "claude-sonnet-4-5") -> None:
        super().__init__(tool_turns)
        self.model = model
        self.thinking_requests: list[dict] = []  # the thinking field of each request

    def sign(self, text: str) -> str:
        return "sig-" + hmac.new(self.KEY, text.encode(), hashlib.sha256).hexdigest()

    def __call__(self, rec: Recorded) -> Reply:
        body = rec.json()
        thinking = body.get("thinking") or {}
        self.thinking_requests.append(thinking)
        on = thinking.get("type") == "enabled"
        msgs = body.get("messages") or []
        for i, m in enumerate(msgs):
            for j, b in enumerate(m.get("content") if isinstance(m.get("content"), list) else ()):
                if b.get("type") == "thinking" and b.get("signature") != self.sign(b.get("thinking", "")):
                    return self.reject(f"messages.{i}.content.{j}: Invalid `signature` in `thinking` block",
                                       _ant_error(f"messages.{i}.content.{j}: Invalid `signature` in `thinking` block"))
        if on:
            if thinking.get("budget_tokens", 0) < 1024 or thinking["budget_tokens"] >= body.get("max_tokens", 0):
                return self.reject("thinking.budget_tokens: must be ≥ 1024 and less than max_tokens",
                                   _ant_error("`max_tokens` must be greater than `thinking.budget_tokens`"))
            last = next((k for k in range(len(msgs) - 1, -1, -1) if msgs[k]["role"] == "assistant"), None)
            if last is not None and isinstance(msgs[last]["content"], list):
                content = msgs[last]["content"]
                if any(b.get("type") == "tool_use" for b in content) and content[0].get("type") not in (
                        "thinking", "redacted_thinking"):
                    msg = (f"messages.{last}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
                           f"`{content[0].get('type')}`. When `thinking` is enabled, a final `assistant` message must "
                           "start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` "
                           "blocks).")
                    return self.reject(msg, _ant_error(msg))
        n = sum(1 for m in msgs if m["role"] == "user" and isinstance(m["content"], list)
                for b in m["content"] if b.get("type") == "tool_result")
        self.answered += 1
        blocks: list[dict] = []
        if on:
            t = f"Step {n + 1}: which command? (ant-thought-{n + 1})"
            blocks.append({"type": "thinking", "thinking": t, "signature": self.sign(t)})
        if n < self.tool_turns and body.get("tools"):
            tool, args = shell_call([t["name"] for t in body["tools"]], f"echo step{n + 1}")
            blocks.append({"type": "tool_use", "id": f"toolu_ant{n + 1:02d}", "name": tool, "input": args})
            stop = "tool_use"
        else:
            blocks.append({"type": "text", "text": f"All {n} steps done."})
            stop = "end_turn"
        usage = {"input_tokens": 40 + n, "output_tokens": 15}
        mid = f"msg_ant{self.answered}"
        if not body.get("stream"):
            return Reply.json({"id": mid, "type": "message", "role": "assistant", "model": self.model,
                               "content": blocks, "stop_reason": stop, "stop_sequence": None, "usage": usage})
        ev = [{"type": "message_start", "message": {"id": mid, "type": "message", "role": "assistant",
                                                     "model": self.model, "content": [], "stop_reason": None,
                                                     "stop_sequence": None, "usage": {"input_tokens": 40 + n,
                                                                                      "output_tokens": 1}}}]
        for i, b in enumerate(blocks):
            if b["type"] == "thinking":
                ev += [{"type": "content_block_start", "index": i, "content_block": {"type": "thinking", "thinking": "",
                                                                                    "signature": ""}},
                       {"type": "content_block_delta", "index": i, "delta": {"type": "thinking_delta",
                                                                             "thinking": b["thinking"]}},
                       {"type": "content_block_delta", "index": i, "delta": {"type": "signature_delta",
                                                                             "signature": b["signature"]}}]
            elif b["type"] == "tool_use":
                ev += [{"type": "content_block_start", "index": i, "content_block": {**b, "input": {}}},
                       {"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta",
                                                                             "partial_json": json.dumps(b["input"])}}]
            else:
                ev += [{"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}},
                       {"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": b["text"]}}]
            ev.append({"type": "content_block_stop", "index": i})
        ev += [{"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 15}}, {"type": "message_stop"}]
        return _sse(ev, named=True)


def _ant_error(message: str) -> dict:
    return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}


GEMINI_MISSING = ("Function call is missing a thought_signature in functionCall parts. This is required for tools "
                  "to work correctly, and missing thought_signature may lead to degraded model performance.")
SKIP_SIGNATURE = "skip_thought_signature_validator"


class GeminiSignatures(_Enforcer):
    """Gemini 3: the first functionCall of each model turn of the active loop carries its
    thoughtSignature; one it did not issue is a 400; the skip value is accepted and counted."""

    KEY = b"scripted-gemini-signing-key"

    def __init__(self, tool_turns: int = 3, with_ids: bool = False) -> None:
        super().__init__(tool_turns)
        self.with_ids = with_ids  # the Gemini API usually sends no call ids (the proxy then makes them)
        self.issued: set[str] = set()
        self.skipped = 0

    def sign(self, name: str, args: dict) -> str:
        import base64

        return base64.b64encode(hmac.new(self.KEY, (name + json.dumps(args, sort_keys=True)).encode(),
                                         hashlib.sha256).digest()).decode()

    def __call__(self, rec: Recorded) -> Reply:
        body = rec.json()
        contents = body.get("contents") or []
        start = 0
        for i, c in enumerate(contents):
            if c.get("role", "user") == "user" and any("text" in p for p in c.get("parts") or ()):
                start = i + 1
        for c in contents[start:]:
            calls = [p for p in c.get("parts") or () if "functionCall" in p] if c.get("role") == "model" else []
            if not calls:
                continue
            sig = calls[0].get("thoughtSignature")
            if sig is None:
                return self.reject(GEMINI_MISSING, _gem_error(GEMINI_MISSING))
            if sig == SKIP_SIGNATURE:
                with self.lock:
                    self.skipped += 1
            elif sig not in self.issued:
                return self.reject("Thought signature is not valid", _gem_error("Thought signature is not valid"))
        n = sum(1 for c in contents for p in c.get("parts") or () if "functionResponse" in p)
        self.answered += 1
        if n < self.tool_turns and body.get("tools"):
            name, args = shell_call([f["name"] for t in body["tools"] for f in t.get("functionDeclarations") or ()],
                                    f"echo step{n + 1}")
            sig = self.sign(name, args)
            with self.lock:
                self.issued.add(sig)
            fc = {"name": name, "args": args} | ({"id": f"gem_call_{n + 1}"} if self.with_ids else {})
            parts = [{"functionCall": fc, "thoughtSignature": sig}]
            finish = "STOP"
        else:
            parts, finish = [{"text": f"All {n} steps done."}], "STOP"
        usage = {"promptTokenCount": 30 + n, "candidatesTokenCount": 10, "totalTokenCount": 40 + n}
        doc = {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": finish, "index": 0}],
               "usageMetadata": usage, "modelVersion": "gemini-3-pro-preview", "responseId": f"gem-r{self.answered}"}
        if ":streamGenerateContent" not in rec.path:
            return Reply.json(doc)
        first = {"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}],
                 "modelVersion": "gemini-3-pro-preview", "responseId": f"gem-r{self.answered}"}
        return Reply.sse([b"data: " + json.dumps(first).encode() + b"\r\n\r\n",
                          b"data: " + json.dumps({"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]},
                                                                  "finishReason": finish, "index": 0}],
                                                  "usageMetadata": usage, "responseId": f"gem-r{self.answered}"}).encode()
                          + b"\r\n\r\n"])


def _gem_error(message: str) -> dict:
    return {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}


class ResponsesReasoning(_Enforcer):
    """A reasoning model behind the Responses API: each reply carries a reasoning item (id,
    summary, encrypted_content) before its function_call; a follow-up's function_call must come
    right after the reasoning item issued with it (modelled on OpenAI's "was provided without
    its required 'reasoning' item"), and encrypted content it did not issue cannot be decrypted."""

    def __init__(self, tool_turns: int = 3, model: str = "gpt-5.5") -> None:
        super().__init__(tool_turns)
        self.model = model
        self.issued: dict[str, tuple[str, str]] = {}  # call id -> (reasoning item id, encrypted content)

    def __call__(self, rec: Recorded) -> Reply:
        body = rec.json()
        items = body.get("input") if isinstance(body.get("input"), list) else []
        for i, it in enumerate(items):
            if it.get("type") == "reasoning" and it.get("encrypted_content") not in {e for _, e in self.issued.values()}:
                return self.reject("The encrypted content for item could not be verified.")
            if it.get("type") == "function_call":
                want = self.issued.get(it.get("call_id"))
                prev = next((x for x in reversed(items[:i]) if x.get("type") != "function_call"), {})
                if want and (prev.get("type") != "reasoning" or (prev.get("id"), prev.get("encrypted_content")) != want):
                    return self.reject(f"Item '{it.get('call_id')}' of type 'function_call' was provided without its "
                                       f"required 'reasoning' item: '{want[0]}'.")
        n = sum(1 for it in items if it.get("type") == "function_call_output")
        self.answered += 1
        rid, k = f"resp_{self.answered}", n + 1
        output: list[dict] = []
        if n < self.tool_turns and body.get("tools"):
            name, args = shell_call([t["name"] for t in body["tools"]], f"echo step{k}")
            cid = f"call_rs{k:02d}"
            enc = "gAAAA" + hmac.new(b"responses-key", cid.encode(), hashlib.sha256).hexdigest()
            self.issued[cid] = (f"rs_{k:02d}", enc)
            output.append({"id": f"rs_{k:02d}", "type": "reasoning", "encrypted_content": enc,
                           "summary": [{"type": "summary_text", "text": f"Plan step {k}"}]})
            output.append({"id": f"fc_{k:02d}", "type": "function_call", "status": "completed", "call_id": cid,
                           "name": name, "arguments": json.dumps(args)})
        else:
            output.append({"id": f"msg_{self.answered}", "type": "message", "status": "completed", "role": "assistant",
                           "content": [{"type": "output_text", "annotations": [], "text": f"All {n} steps done."}]})
        usage = {"input_tokens": 60 + n, "output_tokens": 12, "total_tokens": 72 + n,
                 "output_tokens_details": {"reasoning_tokens": 8}}
        done = {"id": rid, "object": "response", "created_at": 1, "status": "completed", "model": self.model,
                "output": output, "usage": usage}
        if not body.get("stream"):
            return Reply.json(done)
        snap = {**done, "status": "in_progress", "output": [], "usage": None}
        evs = [{"type": "response.created", "response": snap}]
        for i, it in enumerate(output):
            evs.append({"type": "response.output_item.added", "output_index": i,
                        "item": {**it, "encrypted_content": None, "summary": []} if it["type"] == "reasoning"
                        else {**it, "arguments": ""} if it["type"] == "function_call" else {**it, "content": []}})
            if it["type"] == "function_call":
                evs.append({"type": "response.function_call_arguments.delta", "output_index": i, "item_id": it["id"],
                            "delta": it["arguments"]})
            elif it["type"] == "message":
                evs.append({"type": "response.output_text.delta", "output_index": i, "item_id": it["id"],
                            "content_index": 0, "delta": it["content"][0]["text"]})
            evs.append({"type": "response.output_item.done", "output_index": i, "item": it})
        evs.append({"type": "response.completed", "response": done})
        for seq, e in enumerate(evs):
            e["sequence_number"] = seq
        return _sse(evs, named=True)
