"""Shadow turns and replays, the pure part: which turns to shadow, the request a shadow (or
a replay) sends, the reply in the client's protocol, and the comparison of two replies.

- ``should_shadow``: a route's ``shadow_sample`` against a uniform draw in [0, 1).
- ``build_request``: the client's request for another endpoint — translated through the
  same translators as a routed turn (``translate_request``, the one place that calls them),
  asked non-streamed (recorded as plumbing), with the endpoint's own key from its
  ``key_env`` and never a header of the client's (docs/dev/architecture.md §2 rule 7). A turn the
  translators refuse raises ``TranslationError`` before anything is sent.
- ``reply_for_client``: the endpoint's reply translated into the client's protocol.
- ``compare``: two replies' facts side by side, facts only (no quality score): stop
  reasons, tool names in order, tool arguments JSON-equal, text exact match and lengths,
  usage as reported, errors.

No I/O here: the sender (``shadow/sender.py``) and the ``replay`` command do the sending.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import jsonc
from ..routing import Endpoint, content_refused, shadow_refusal, shadowable, target_kind, turn_facts
from ..errors import Refused
from .. import protocols
from .reply_facts import Facts
from .. import translate
from ..translate import pair_refusal
from ..turn import translate_for_endpoint  # what a routed turn uses (endpoint stop strings included)

def should_shadow(sample: float, draw: float) -> bool:
    """Shadow this turn? ``draw`` is uniform in [0, 1): a sample of 1.0 takes every turn, 0 none."""
    return draw < sample


@dataclass
class OutboundRequest:
    """What a shadow or replay sends to ``endpoint``."""

    endpoint: Endpoint
    url: str
    headers: dict[str, str]
    body: bytes
    model: str | None
    dropped: list[str] = field(default_factory=list)
    plumbing: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- the translators, in one place


def translate_request(client: str, ep: Endpoint, req: dict, model: str | None) -> tuple[dict, list[str], list[str]]:
    """The client's request body for ``ep``: (body, dropped paths, plumbing). Raises
    TranslationError when no translator exists or the translation refuses the turn."""
    if client == ep.protocol:
        body = dict(req)
        if model:
            body["model"] = model
        return body, [], []
    if why := pair_refusal(client, ep.protocol):
        raise Refused(400, why)
    tr = translate_for_endpoint(client, ep, req, model)
    return tr.body, list(tr.dropped), list(tr.plumbing)


def reply_for_client(target: str, client: str, status: int, body: bytes) -> tuple[int, bytes]:
    """A whole reply of the ``target`` protocol as the client's protocol would carry it."""
    if target == client:
        return status, body
    if status >= 400:
        return translate.error(target, client, status, body)
    return status, translate.reply(target, client, body).body


# ---------------------------------------------------------------- the request


def build_request(client: str, kind: str, body: bytes, ep: Endpoint, env: Mapping[str, str]) -> OutboundRequest:
    """The request a shadow/replay sends to ``ep`` for a client request of ``client`` protocol."""
    if not shadowable(client, kind):
        what = f"{client} {kind} requests" if kind else f"{client} turns"
        raise Refused(400, f"{what} are not shadowed or replayed")
    if why := shadow_refusal(client, ep.protocol):
        raise Refused(400, why)
    try:
        req = jsonc.loads(body)
    except (jsonc.JSONDecodeError, UnicodeDecodeError) as e:
        raise Refused(400, f"the recorded request is not valid JSON ({e})") from None
    if not isinstance(req, dict):
        raise Refused(400, "the recorded request is not a JSON object")
    if why := content_refused(turn_facts(client, req, len(body), {}), ep):  # what ep takes (routing/accepts.py)
        raise Refused(400, why)
    plumbing = []
    if req.get("stream") is True:
        req = {k: v for k, v in req.items() if k not in ("stream", "stream_options")}
        plumbing.append("stream: asked non-streamed (the whole reply is compared, never shown to the client)")
    model = ep.model if ep.model and ep.model != req.get("model") else None
    out, dropped, more = translate_request(client, ep, req, model)
    out.pop("stream_options", None)
    headers = {"content-type": "application/json", "accept": "application/json", "accept-encoding": "identity"}
    headers.update(protocols.get(ep.protocol).sent_headers)  # the version the body is written for
    headers.update(ep.auth_headers(env))  # the endpoint's own key, never the client's
    return OutboundRequest(ep, ep.request_url(target_kind(ep.protocol) or "", out.get("model")), headers,
                           jsonc.dumpb(out), out.get("model") if isinstance(out.get("model"), str) else None,
                           dropped, plumbing + more)


# ---------------------------------------------------------------- comparison


def json_equal(a: Any, b: Any) -> bool:
    """JSON-equal: same values whatever the key order or spacing (a string that is JSON is
    read first); 1 and 1.0 are equal, true and 1 are not."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    return a == b


def compare(primary: Facts, shadow: Facts) -> dict:
    """Facts about two replies to the same turn. Agreement fields are None when a side has
    no reply to compare (an error)."""
    both = primary.error is None and shadow.error is None
    p_names = [c["name"] for c in primary.tool_calls]
    s_names = [c["name"] for c in shadow.tool_calls]
    same_names = p_names == s_names
    return {
        "compared": both,
        "stop_reason": {"primary": primary.stop_reason, "shadow": shadow.stop_reason,
                        "same": primary.stop_reason == shadow.stop_reason if both else None},
        "tool_names": {"primary": p_names, "shadow": s_names, "same": same_names if both else None},
        "tool_arguments_equal": (same_names and all(json_equal(a["arguments"], b["arguments"]) for a, b in
                                                    zip(primary.tool_calls, shadow.tool_calls))) if both else None,
        "text": {"same": primary.text == shadow.text if both else None,
                 "primary_chars": len(primary.text), "shadow_chars": len(shadow.text)},
        "usage": {"primary": primary.usage, "primary_counting": primary.usage_protocol,
                  "shadow": shadow.usage, "shadow_counting": shadow.usage_protocol},
        "errors": {"primary": primary.error, "shadow": shadow.error},
    }
