"""Anthropic cache breakpoints (``cache_control``) on an encoded body: the client's own carried
(at most four), and ``cache: auto``'s placed on the stable prefix (docs/dev/architecture.md rule 1:
billing plumbing, never content)."""

from __future__ import annotations

from typing import Any

from ...neutral import RequestTranslation

MAX_BREAKPOINTS = 4  # Anthropic takes at most 4 cache_control blocks in a request
EPHEMERAL = {"type": "ephemeral"}
_NOT_MARKABLE = ("thinking", "redacted_thinking")  # blocks that cannot carry cache_control


CHAT_BREAKPOINT = "prompt_cache_breakpoint"  # a Chat client's own breakpoint on a text part (OpenAI GPT-5.6+)
CARRIED = " (the client's own cache breakpoint)"  # how encode.py records one it carried (conversions end with it)


def at_most_four_breakpoints(rt: RequestTranslation, out: dict[str, Any]) -> None:
    """The client's own breakpoints carried (encode.py), at most ``MAX_BREAKPOINTS`` of
    them: Anthropic rejects a fifth. The last four are kept (each covers the longest prefix
    before it); an earlier one is dropped, recorded."""
    if not any(c.endswith(CARRIED) for c in rt.converted):  # the usual case: no breakpoint of the client's
        return
    marked = [(i, k) for i, m in enumerate(out.get("messages") or ()) if isinstance(m.get("content"), list)
              for k, b in enumerate(m["content"]) if isinstance(b, dict) and "cache_control" in b]
    extra = len(marked) + _breakpoint_count({k: v for k, v in out.items() if k != "messages"}) - MAX_BREAKPOINTS
    if extra <= 0:
        return
    for i, k in marked[:extra]:
        m = out["messages"][i] = dict(out["messages"][i])
        content = m["content"] = list(m["content"])
        content[k] = {key: v for key, v in content[k].items() if key != "cache_control"}
    rt.warnings.append(f"the client's {extra} earliest cache breakpoint(s) not carried: Anthropic takes at most "
                       f"{MAX_BREAKPOINTS} (the last ones, covering the longest prefixes, are)")


def _breakpoint_count(body: dict[str, Any]) -> int:
    """The cache_control blocks a body already carries (tools, system blocks, message blocks)."""
    n = sum(1 for t in body.get("tools") or () if isinstance(t, dict) and "cache_control" in t)
    system = body.get("system")
    n += sum(1 for b in system if isinstance(b, dict) and "cache_control" in b) if isinstance(system, list) else 0
    for m in body.get("messages") or ():
        content = m.get("content") if isinstance(m, dict) else None
        n += sum(1 for b in content if isinstance(b, dict) and "cache_control" in b) if isinstance(content, list) else 0
    return n


def _mark_content(holder: dict[str, Any], key: str, path: str) -> str | None:
    """A breakpoint on the last markable block of ``holder[key]`` (a string becomes its one text
    block, the same text); the path marked, or None when nothing there can carry one."""
    value = holder.get(key)
    if isinstance(value, str):
        if not value:
            return None
        holder[key] = [{"type": "text", "text": value, "cache_control": dict(EPHEMERAL)}]
        return f"{path}[0].cache_control"
    if not isinstance(value, list):
        return None
    value = holder[key] = list(value)  # a list of its own: the input's is never changed
    for i in range(len(value) - 1, -1, -1):
        block = value[i]
        if isinstance(block, dict) and block.get("type") not in _NOT_MARKABLE and block.get("text") != "":
            if "cache_control" in block:
                return None  # already a breakpoint there
            value[i] = {**block, "cache_control": dict(EPHEMERAL)}
            return f"{path}[{i}].cache_control"
    return None


def place_cache_breakpoints(body: dict[str, Any]) -> list[str]:
    """``cache: auto``: breakpoints where a provider that caches by itself would have cached,
    on a translated body (changed in place; only new containers, never shared leaves): the end
    of the conversation (what the next turn reads), the end of the previous user turn (what this
    turn reads, written by the turn before), the system prompt, the tools; at most
    ``MAX_BREAKPOINTS`` with the client's own, in that order of value. Returns the paths added
    (recorded as plumbing). The model sees nothing new: cache_control is billing, not content."""
    room = MAX_BREAKPOINTS - _breakpoint_count(body)
    messages = body.get("messages")
    spots: list[tuple[dict[str, Any], str, str]] = []
    if isinstance(messages, list) and messages:
        last = len(messages) - 1
        spots.append((messages[last], "content", f"messages[{last}].content"))
        prev = next((i for i in range(last - 1, -1, -1)
                     if isinstance(messages[i], dict) and messages[i].get("role") == "user"), None)
        if prev is not None:
            spots.append((messages[prev], "content", f"messages[{prev}].content"))
    if body.get("system"):
        spots.append((body, "system", "system"))
    tools = body.get("tools")
    added: list[str] = []
    for holder, key, path in spots:
        if len(added) >= room:
            return added
        if holder is not body and isinstance(messages, list):  # a message: a copy of its own (no shared leaf changes)
            i = int(path.split("[")[1].split("]")[0])
            holder = messages[i] = dict(holder)
        if (where := _mark_content(holder, key, path)) is not None:
            added.append(where)
    if isinstance(tools, list) and tools and len(added) < room and isinstance(tools[-1], dict) \
            and "cache_control" not in tools[-1]:
        body["tools"] = [*tools[:-1], {**tools[-1], "cache_control": dict(EPHEMERAL)}]
        added.append(f"tools[{len(tools) - 1}].cache_control")
    return added
