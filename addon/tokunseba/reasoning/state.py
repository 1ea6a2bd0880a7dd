"""Provider reasoning state of a routed tool loop: what is captured from a translated reply,
how it is keyed, and how it is put back (pure: no I/O; the store is reasoning/store.py).

Capture (``Capture``, fed the upstream's neutral reply events, streamed or whole): what the
endpoint produced that the client's protocol cannot hand back, in the endpoint's own wire
form (neutral.state): Chat ``reasoning_content`` / ``reasoning`` text, Anthropic signed
``thinking`` and ``redacted_thinking`` blocks, Gemini ``thoughtSignature``s of function
calls, Responses reasoning items (id, summary, ``encrypted_content``): each protocol's facts
say which (``state_payload``). Unsigned thinking from an Anthropic upstream, or thinking of a
protocol that has no place for it going back, is not kept: nothing is kept that could not be sent back as it came.

Keys: what the client does hand back. Each tool call id of the reply (``call:<id>``); a reply
without tool calls by its text (``text:<sha256>``). A record also names the endpoint, model
and protocol that produced it.

Restore (``restore``): for a request about to go to (endpoint, model), each neutral
assistant message whose key has a record of that very origin gets the record's state under
``PROVIDER_STATE`` (a copy of the message: the client's parsed body is shared by the
translations for other endpoints); a record of any other origin is withheld. The report
lists both, for the ledger. Never forged: nothing is made up, nothing crosses origins.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from .. import protocols
from ..neutral import Conversation
from ..neutral import BlockDelta, BlockSignature, BlockStart, MessageStop
from ..neutral import Message
from ..neutral import PROVIDER_STATE, ProviderState

JOIN = "\n\n"  # text blocks joined as the request decoders join them


@dataclass(frozen=True, slots=True)
class Record:
    """One piece of state and where it came from."""

    endpoint: str
    model: str
    protocol: str
    payload: dict
    request_id: str
    at: float = 0.0  # when it was captured (epoch seconds)


def call_key(call_id: str) -> str:
    return "call:" + call_id


def text_key(text: str) -> str:
    return "text:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


# ---------------------------------------------------------------------------------------
# capture


class _Block:
    """One block of the reply as the protocols' ``state_payload`` read it: kind, id, text,
    signature, raw. Text is kept as its pieces (joined once, when read: a long reply's deltas
    are not copied again at each one); a tool call's arguments are not kept (never state)."""

    __slots__ = ("kind", "id", "parts", "signature", "raw")

    def __init__(self, ev: BlockStart) -> None:
        self.kind, self.id, self.signature, self.raw = ev.kind, ev.id, ev.signature, ev.raw
        self.parts: list[str] | None = None if ev.kind == "tool_use" else []

    @property
    def text(self) -> str:
        return "".join(self.parts) if self.parts else ""


class Capture:
    """The state one translated reply carried, gathered from its neutral events (``on``, one
    event at a time, or ``message`` for a whole reply). ``on_stop(capture)`` runs once, when
    the reply's stop event passes: before the client's translated terminal event is written,
    so a client that answers its tool calls at once finds the state already kept."""

    __slots__ = ("protocol", "endpoint", "model", "request_id", "on_stop", "kept", "_blocks", "_by_index")

    def __init__(self, protocol: str, endpoint: str, model: str, request_id: str,
                 on_stop: Callable[["Capture"], object] | None = None) -> None:
        self.protocol, self.endpoint, self.model, self.request_id = protocol, endpoint, model, request_id
        self.on_stop = on_stop
        self.kept: list[str] = []  # the keys stored (set by on_stop's owner)
        self._blocks: list[_Block] = []
        self._by_index: dict[int, _Block] = {}

    def on(self, ev: object) -> None:
        t = type(ev)
        if t is BlockDelta:
            b = self._by_index.get(ev.index)  # type: ignore[attr-defined]
            if b is not None and b.parts is not None:
                b.parts.append(ev.text)  # type: ignore[attr-defined]
        elif t is BlockStart:
            b = self._by_index[ev.index] = _Block(ev)  # type: ignore[attr-defined, arg-type]
            self._blocks.append(b)
        elif t is BlockSignature:
            b = self._by_index.get(ev.index)  # type: ignore[attr-defined]
            if b is not None:
                b.signature = (b.signature or "") + ev.signature  # type: ignore[attr-defined]
        elif t is MessageStop and self.on_stop is not None:
            stop, self.on_stop = self.on_stop, None
            stop(self)

    def message(self, msg: Message) -> None:
        for ev in msg.events():
            self.on(ev)

    def records(self, at: float = 0.0) -> list[tuple[str, Record]]:
        """(key, record) for each key of the reply; [] when it carried no state to keep."""
        facts = protocols.find(self.protocol)  # what of a reply is state, per protocol: its facts
        payload = facts.state_payload(self._blocks) if facts is not None and facts.state_payload else None
        if not payload:
            return []
        rec = Record(self.endpoint, self.model, self.protocol, payload, self.request_id, at)
        calls = [b.id for b in self._blocks if b.kind == "tool_use" and b.id]
        if calls:
            return [(call_key(c), rec) for c in calls]
        text = JOIN.join(b.text for b in self._blocks if b.kind == "text" and b.text)
        return [(text_key(text), rec)] if text else []


# ---------------------------------------------------------------------------------------
# restore


@dataclass
class RestoreReport:
    """What a restore did, for the ledger: ``restored`` and ``withheld`` entries name the
    message, the keys (call ids or a text hash), the origin and the capturing request id."""

    restored: list[dict] = field(default_factory=list)
    withheld: list[dict] = field(default_factory=list)
    problem: str | None = None  # the store could not be read (nothing restored: today's behaviour)
    looked_up: int = 0  # keys asked of the store

    def events(self) -> list[tuple[str, dict]]:
        """Ledger events: one for what was restored, one for what was withheld (each with its
        ``items``: message, keys, capturing request, kind; and every key flat in ``keys``), one
        for a store problem. One row per turn, however long the loop."""
        out: list[tuple[str, dict]] = []
        if self.restored:
            r0 = self.restored[0]
            out.append(("state_restored", {
                "endpoint": r0["endpoint"], "model": r0["model"], "keys": [k for r in self.restored for k in r["keys"]],
                "kind": "+".join(sorted({r["kind"] for r in self.restored})),
                "items": [{k: r[k] for k in ("message", "keys", "from", "kind")} for r in self.restored]}))
        if self.withheld:
            w0 = self.withheld[0]
            out.append(("state_withheld", {
                "to": w0["to"], "origin": ", ".join(sorted({w["origin"] for w in self.withheld})),
                "keys": [k for w in self.withheld for k in w["keys"]], "why": w0["why"],
                "items": [{k: w[k] for k in ("message", "keys", "from", "origin", "kind")} for w in self.withheld]}))
        if self.problem:
            out.append(("state_unavailable", {"problem": self.problem, "looked_up": self.looked_up}))
        return out


def message_keys(m: dict) -> list[str]:
    """The keys of a neutral assistant message: its tool call ids, else its text."""
    calls = m.get("tool_calls")
    if isinstance(calls, list) and calls:
        return [call_key(tc["id"]) for tc in calls if isinstance(tc, dict) and isinstance(tc.get("id"), str)]
    c = m.get("content")
    if isinstance(c, list):
        c = JOIN.join(p.get("text") or "" for p in c if isinstance(p, dict) and p.get("type") == "text")
    return [text_key(c)] if isinstance(c, str) and c else []


Lookup = Callable[[Iterable[str]], Mapping[str, list[Record]]]


def restore(conv: Conversation, lookup: Lookup, endpoint: str, model: str, protocol: str) -> RestoreReport:
    """Put back, on each assistant message of ``conv``, the state its origin produced, when
    that origin is (``endpoint``, ``model``); withhold (and report) any other origin's."""
    report = RestoreReport()
    msgs = conv.body.get("messages")
    if not isinstance(msgs, list):
        return report
    wanted: list[tuple[int, list[str]]] = []
    for i, m in enumerate(msgs):
        if isinstance(m, dict) and m.get("role") == "assistant" and (keys := message_keys(m)):
            wanted.append((i, keys))
    if not wanted:
        return report
    all_keys = [k for _, keys in wanted for k in keys]
    report.looked_up = len(all_keys)
    try:
        found = lookup(all_keys)
    except Exception as e:  # a broken store degrades to no restore, said so
        report.problem = f"{type(e).__name__}: {e}"
        return report
    if not found:
        return report
    new_msgs = None
    for i, keys in wanted:
        mine = other = None
        for k in keys:
            for rec in found.get(k, ()):
                if rec.endpoint == endpoint and rec.model == model and rec.protocol == protocol:
                    mine = mine or rec
                else:
                    other = other or rec
        what = [k.split(":", 1)[1] if k.startswith("call:") else k for k in keys]
        if mine is not None:
            if new_msgs is None:
                new_msgs = list(msgs)
            old = msgs[i]
            new_msgs[i] = conv.replace_part(old, {**old, PROVIDER_STATE: ProviderState(protocol, mine.payload,
                                                                                        mine.request_id)})
            report.restored.append({"message": conv.client_path(f"messages[{i}]"), "keys": what, "from": mine.request_id,
                                    "endpoint": endpoint, "model": model, "kind": _kind(mine)})
        elif other is not None:
            report.withheld.append({"message": conv.client_path(f"messages[{i}]"), "keys": what, "from": other.request_id,
                                    "origin": f"{other.endpoint}/{other.model}", "to": f"{endpoint}/{model}",
                                    "kind": _kind(other),
                                    "why": "made by another endpoint or model: it goes back only to its origin"})
    if new_msgs is not None:
        conv.body = {**conv.body, "messages": new_msgs}
    return report


def _kind(rec: Record) -> str:
    facts = protocols.find(rec.protocol)
    return facts.state_kind(rec.payload) if facts is not None and facts.state_kind else rec.protocol


# ---------------------------------------------------------------------------------------
# explain

STATE_EVENTS = ("state_restored", "state_withheld", "state_kept", "state_unavailable", "tool_loop")


def explain_state(kind: str, d: dict) -> list[tuple[str, str]]:
    """A ledger event of this module as ``tokunseba explain`` lines: (label, text) each."""
    def ids(x: dict) -> str:
        keys = x.get("keys")
        return ", ".join(map(str, keys)) if isinstance(keys, list) else ""

    items = d.get("items")
    if not isinstance(items, list):
        items = [d]
    if kind == "state_restored":
        return [("reasoning", f"{x.get('kind') or 'state'} for {ids(x)} restored from {x.get('from')} "
                              f"({d.get('endpoint')}/{d.get('model')}, {x.get('message')})") for x in items]
    if kind == "state_withheld":
        return [("reasoning", f"{x.get('kind') or 'state'} for {ids(x)} withheld: made by {x.get('origin')} "
                              f"({x.get('from')}), this turn went to {d.get('to')}") for x in items]
    if kind == "state_kept":
        keys = [k.split(":", 1)[1] if k.startswith("call:") else "a reply without tool calls" for k in d.get("keys") or []]
        return [("reasoning", f"kept for {', '.join(keys)} (goes back only to {d.get('endpoint')}/{d.get('model')})")]
    if kind == "tool_loop":
        return [("tool loop", ("followed its loop, not its rule: " if d.get("followed") else "") + str(d.get("why")))]
    if kind == "state_unavailable":
        return [("reasoning", f"store unavailable, nothing restored from it: {d.get('problem')}")]
    return []
