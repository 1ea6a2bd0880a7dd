"""A scripted Responses endpoint that speaks WebSocket, on loopback, for end-to-end tests and the
benchmark (the ``websockets`` package; its own event loop in a thread).

``GET /v1/responses`` upgraded: each client ``response.create`` with ``generate: false`` (a
warm-up) is answered ``response.created`` + ``response.completed`` with no output; each other
one gets the next scripted reply (a list of events, written one message each, ``delay``
seconds apart; the last one repeats), its ``response.id`` numbered. ``cut_after``: close the
connection after that many events of a turn (no close frame: a cut). Every message received
and every HTTP request line are recorded (``messages``, ``requests``): a test sees that the
turns came as messages, with no fallback POST.
"""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass, field

from websockets.asyncio.server import ServerConnection, serve
from websockets.http11 import Request

USAGE = {"input_tokens": 5120, "input_tokens_details": {"cached_tokens": 4096}, "output_tokens": 41,
         "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 5161}


def frame_events(n: int = 3) -> list[bytes]:
    """The first ``n`` of a short Responses turn's events (created, one non-ASCII delta with a
    newline, completed with usage), each one JSON text frame's bytes."""
    evs = [{"type": "response.created", "response": {"id": "resp_1", "output": []}},
           {"type": "response.output_text.delta", "delta": "h\u00e9llo\nthere"},
           {"type": "response.completed", "response": {"id": "resp_1", "output": [{"type": "message"}],
                                                       "usage": {"input_tokens": 7, "output_tokens": 2}}}]
    return [json.dumps(e, ensure_ascii=False).encode() for e in evs[:n]]


def text_events(text_parts: list[str], usage: dict | None = None, model: str = "gpt-5.5") -> list[dict]:
    """A Responses reply with one message, as events (``{rid}``: the response id, filled in)."""
    text = "".join(text_parts)
    mid = "msg_ws0001"
    item = {"id": mid, "type": "message", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "annotations": [], "text": text}]}
    snap = {"id": "{rid}", "object": "response", "created_at": 1767225600, "status": "in_progress", "model": model,
            "output": []}
    return [
        {"type": "response.created", "response": snap},
        {"type": "response.in_progress", "response": snap},
        {"type": "response.output_item.added", "output_index": 0, "item": {**item, "status": "in_progress",
                                                                          "content": []}},
        {"type": "response.content_part.added", "item_id": mid, "output_index": 0, "content_index": 0,
         "part": {"type": "output_text", "annotations": [], "text": ""}},
        *[{"type": "response.output_text.delta", "item_id": mid, "output_index": 0, "content_index": 0, "delta": t,
           "logprobs": []} for t in text_parts],
        {"type": "response.output_text.done", "item_id": mid, "output_index": 0, "content_index": 0, "text": text,
         "logprobs": []},
        {"type": "response.content_part.done", "item_id": mid, "output_index": 0, "content_index": 0,
         "part": {"type": "output_text", "annotations": [], "text": text}},
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": {**snap, "status": "completed", "output": [item],
                                                    "usage": usage or USAGE}},
    ]


@dataclass
class WsScript:
    events: list[dict]
    delay: float = 0.0
    cut_after: int | None = None


@dataclass
class WsUpstream:
    replies: list[WsScript] = field(default_factory=list)
    messages: list[dict] = field(default_factory=list)  # every client message, parsed
    requests: list[tuple[str, str]] = field(default_factory=list)  # (method, path) of every HTTP request
    upgrades: list[dict[str, str]] = field(default_factory=list)  # the upgrade requests' headers
    port: int = 0

    def __enter__(self) -> "WsUpstream":
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the WebSocket upstream did not start")
        return self

    def __exit__(self, *exc) -> None:
        if self._loop.is_running():
            self._loop.call_soon_threadsafe(self._stop.set_result, None)
        self._thread.join(5)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def script(self, *replies: WsScript) -> None:
        self.replies.extend(replies)

    def turns(self) -> list[dict]:
        return [m for m in self.messages if m.get("type") == "response.create" and m.get("generate") is not False]

    # ---- the server
    def _run(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._loop.run_until_complete(self._main())

    async def _main(self) -> None:
        self._stop: asyncio.Future = self._loop.create_future()
        self._n = 0
        async with serve(self._session, "127.0.0.1", 0, process_request=self._request, compression="deflate",
                         max_size=None) as server:
            self.port = next(iter(server.sockets)).getsockname()[1]
            self._ready.set()
            await self._stop

    def _request(self, conn: ServerConnection, request: Request):
        self.requests.append(("GET" if request.headers.get("upgrade") else "?", request.path))
        self.upgrades.append({k.lower(): v for k, v in request.headers.raw_items()})
        return None

    async def _session(self, ws: ServerConnection) -> None:
        try:
            async for raw in ws:
                msg = json.loads(raw)
                self.messages.append(msg)
                if msg.get("type") != "response.create":
                    continue
                self._n += 1
                rid = f"resp_ws{self._n:04d}"
                if msg.get("generate") is False:
                    snap = {"id": rid, "object": "response", "created_at": 1767225600, "status": "completed",
                            "model": msg.get("model"), "output": [],
                            "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}}
                    await ws.send(json.dumps({"type": "response.created", "response": {**snap, "status": "in_progress"}}))
                    await ws.send(json.dumps({"type": "response.completed", "response": snap}))
                    continue
                script = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
                for i, ev in enumerate(script.events):
                    if script.cut_after is not None and i >= script.cut_after:
                        ws.transport.abort()  # a cut: no close frame
                        return
                    await ws.send(json.dumps(ev).replace('"{rid}"', json.dumps(rid)))
                    if script.delay:
                        await asyncio.sleep(script.delay)
        except Exception:
            return
