"""How one turn's reply ended, as the path that made it saw it — the record the adapter
(proxy/mitm.py) writes to the ledger and shows in mitmweb — and the judgements that fill it.

Pure: no mitmproxy, no I/O. ``Outcome`` is filled by every reply path (a stream's pump, a
translated whole reply, a passed-on whole reply, a local or error answer); ``usage_of``,
``upstream_failure`` and ``shape_problem`` say what a reply or a failure was, in words the
ledger keeps; ``model_of`` the model a whole reply names.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import jsonc, protocols
from ..neutral import Usage
from .stream_watch import whole_verdict
from .plan import Turn, is_count
from ..states import Action


@dataclass
class Outcome:
    """How one turn's reply ended, as the path that made it saw it (a stream's pump, a
    translated whole reply, a passed-on whole reply, a local or error answer): what
    ``Tokunseba._complete`` records in the ledger and shows in mitmweb."""

    status: int | None  # the status the client got; None: no reply reached it
    usage: Usage | None = None  # as the upstream reported it
    client_usage: dict | None = None  # as the client was told it
    # stop_reason (the upstream's), dropped, warnings, converted (what the client was told in its
    # place: neutral/endpoint_cap.py), and a stream's errors, completed
    details: dict = field(default_factory=dict)
    problem: str | None = None  # why the reply is not clean, though it got an answer
    failed: bool = False  # the turn failed whatever its reply (the upstream broke, ...)
    first_byte: float | None = None  # when the first byte of a stream left; None: a whole reply
    kept: bytes | None = None  # the stream the client got, when kept (--ledger-bodies, a shadowed turn)
    model: str | None = None  # the model the reply named (the upstream's: translated or passed on); None: none

    @classmethod
    def of_reply(cls, status: int, rep) -> "Outcome":
        """A translated whole reply (translate_whole's report)."""
        return cls(status, rep.usage, rep.client_usage,
                   {"stop_reason": rep.stop_reason, "dropped": rep.dropped, "warnings": rep.warnings,
                    **({"converted": rep.converted} if rep.converted else {})},
                   model=rep.message.model if rep.message is not None else None)

    @classmethod
    def of_whole(cls, protocol: str, status: int, content_type: str | None, body: bytes) -> "Outcome":
        """A whole reply passed on in the client's own protocol (pass-through, retarget)."""
        obj, problem = whole_verdict(content_type, body)  # parsed once: usage and model are read from it
        usage = usage_of(protocol, obj)
        return cls(status, usage, usage.reported if usage else None, problem=problem, model=model_of(protocol, obj))


def usage_of(protocol: str, obj: object) -> Usage | None:
    """The usage object of a whole JSON reply (parsed, or its bytes), as reported, where the
    protocol's facts say it lives (``usage``; Gemini ``usageMetadata``); None when absent,
    empty where the protocol sends an empty one, or unreadable."""
    facts = protocols.find(protocol)
    if facts is None:
        return None
    if isinstance(obj, (bytes, bytearray)):
        try:
            obj = jsonc.loads(bytes(obj)) if obj else None
        except Exception:
            return None
    u = obj.get(facts.usage_key) if isinstance(obj, dict) else None
    if not isinstance(u, dict) or (not u and facts.usage_key != "usage"):
        return None
    return Usage(facts.usage_counting, u)


def model_of(protocol: str, obj: object) -> str | None:
    """The model a whole JSON reply (parsed) names, where the protocol's facts say it does
    (``model``; Gemini ``modelVersion``); None when absent or not a string."""
    facts = protocols.find(protocol)
    if facts is None or not isinstance(obj, dict):
        return None
    model = obj.get(facts.reply_model_key)
    return model if isinstance(model, str) and model else None


def upstream_failure(msg: str) -> str:
    """mitmproxy's error text for a flow whose upstream failed, said as what happened."""
    low = msg.lower()
    if "peer closed" in low or "reset" in low or "incomplete" in low or "broken pipe" in low:
        return f"upstream connection broke: {msg}"
    return msg


def shape_problem(turn: Turn, status: int, content_type: str) -> str | None:
    """A routed turn's 2xx reply in the other shape than the client asked for (a stream for
    a whole request, or the reverse): what the client would choke on, said as such."""
    if turn.action not in (Action.TRANSLATE, Action.RETARGET) or status >= 400 or is_count(turn.detected):
        return None
    is_sse = content_type.split(";")[0].strip().lower() == "text/event-stream"
    if turn.stream and not is_sse:
        return f"upstream sent a whole reply ({content_type or 'no content-type'}) where a stream was due"
    if not turn.stream and is_sse:
        return "upstream sent a stream where a whole reply was due"
    return None
