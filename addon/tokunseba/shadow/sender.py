"""Sends shadow turns in the background, on mitmproxy's event loop, off every flow's path.

``ShadowSender.submit(job)`` is called after a turn is planned and returns at once: when
``concurrency`` shadows are already taken the shadow is not sent and a
``shadow_skipped`` row is recorded; otherwise a task waits until the primary turn has
finished (``primary_done``, called by the adapter with the reply the client got) — so a
shadow never competes with its own turn — then builds the shadow request
(shadow.build_request: translated, non-streamed, the shadow endpoint's own key), sends it
with a pooled httpx client (never through a proxy, TLS verified as the relay verifies)
within ``timeout_s``, compares the two replies' facts and writes one ``shadow`` row linked
to the primary's request id, with the turn's stratum and the agreement verdict
(shadow/agreement.py) in its comparison; ``observed`` (the proxy's earned-route book,
routing/earn.py) is told each verdict once its row is written. Translation, comparison and
ledger writes run in worker threads, off mitmproxy's event loop. The shadow's reply is never shown to the client and
its tool calls are never executed: it is only read. httpx is imported with the first shadow
sent (a proxy without shadow routes never loads it: start-up time).
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..routing import Endpoint
from ..errors import TranslationError
from ..ledger import Ledger
from .agreement import verdict
from .reply_facts import Facts, reply_facts
from .turns import build_request, compare
from ..neutral import Usage

if TYPE_CHECKING:
    import httpx

log = logging.getLogger("tokunseba.shadow")

PRIMARY_WAIT_S = 3600.0  # a primary turn still streaming after this is compared as unfinished
MAX_BODY = 4 * 1024 * 1024


@dataclass
class ShadowJob:
    request_id: str  # the primary turn's
    route: str
    endpoint: Endpoint
    client_protocol: str
    kind: str  # the client's request kind (messages, chat, responses)
    body: bytes  # the client's request as it came
    origin_host: str  # where the client sent it
    origin_port: int
    started_at: float = field(default_factory=time.time)
    stratum: dict | None = None  # routing.Stratum.record() of the turn
    schema: dict | None = None  # the structured output the turn asks for (routing.TurnFacts.output_schema)
    tools_offered: bool = False
    role: str = "shadow"  # "shadow" (a route's shadow:), "learning" (earn: to the candidate), "canary" (earn: back)
    earn: dict | None = None  # the route's earn (routing.Earn.record()), for learning and canary shadows
    primary_endpoint: str | None = None  # an earned route's: the endpoint the client's reply must come from


@dataclass
class _Primary:
    done: asyncio.Event = field(default_factory=asyncio.Event)
    status: int | None = None
    body: bytes = b""
    error: str | None = None
    answered_by: str | None = None  # the endpoint whose reply the client got (after any failover)


def _http_error() -> type[Exception]:
    """httpx's error class (httpx is loaded by then: only a shadow sent raises it)."""
    import httpx

    return httpx.HTTPError


class ShadowSender:
    def __init__(self, ledger: Callable[[], Ledger | None], *, concurrency: int, timeout_s: float,
                 env: Mapping[str, str], ssl_context: ssl.SSLContext | bool = True,
                 observed: Callable[[str, str, dict, dict, float, str], None] | None = None) -> None:
        self._ledger = ledger
        self.observed = observed  # (route, candidate, stratum, verdict, at, request id): routing.EarnBook.observe
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.env = env
        self.active = 0
        self.tasks: set[asyncio.Task] = set()
        self.primaries: dict[str, _Primary] = {}
        self._ssl_context = ssl_context
        self._http: httpx.AsyncClient | None = None  # made with the first shadow sent

    @property
    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            import httpx

            # httpx's own 5 s default would cut slow local models short: timeout_s bounds each shadow
            self._http = httpx.AsyncClient(verify=self._ssl_context, trust_env=False, follow_redirects=False,
                                           timeout=self.timeout_s, limits=httpx.Limits(max_connections=max(self.concurrency, 1)))
        return self._http

    def submit(self, job: ShadowJob) -> bool:
        """Take a shadow of this turn, or record it skipped (the bound is full). Returns at
        once; never raises into the flow's path."""
        if self.active >= self.concurrency:
            why = f"{self.active} shadow turns already in flight (tokunseba_shadow_concurrency={self.concurrency})"
            def skipped(ledger: Ledger) -> None:
                ledger.add_shadow(job.request_id, "shadow_skipped", started_at=job.started_at, route=job.route,
                                  endpoint=job.endpoint.name, target_protocol=job.endpoint.protocol, error=why)
                ledger.event(job.request_id, "shadow_skipped", {"endpoint": job.endpoint.name, "reason": why})

            self._spawn(self._write(skipped))
            return False
        self.active += 1
        self.primaries[job.request_id] = _Primary()
        self._spawn(self._run(job))
        return True

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def primary_done(self, request_id: str, status: int | None, body: bytes | None, error: str | None,
                     answered_by: str | None = None) -> None:
        """The primary turn finished: the reply its client got (or its error), from ``answered_by``."""
        p = self.primaries.get(request_id)
        if p is not None:
            p.status, p.body, p.error, p.answered_by = status, (body or b"")[:MAX_BODY], error, answered_by
            p.done.set()

    async def _run(self, job: ShadowJob) -> None:
        """Wait until the client has its reply, then send the shadow: the shadow's work never
        competes with its own turn. The shadow's latency is its own request's."""
        p = self.primaries[job.request_id]
        try:
            try:
                await asyncio.wait_for(p.done.wait(), PRIMARY_WAIT_S)
            except (TimeoutError, asyncio.TimeoutError):
                p.error = f"the primary turn had not finished after {PRIMARY_WAIT_S:g} s"
            await asyncio.sleep(0)  # let the adapter hand a whole reply to the client first
            if job.primary_endpoint is not None and p.error is None and p.answered_by != job.primary_endpoint:
                # an earned route's turn failed over: the client's reply is not the side compared
                p.error = f"{job.primary_endpoint} did not answer (the turn failed over to {p.answered_by or 'its host'})"
            res: dict = {"status": None, "body": b"", "error": None, "latency_ms": None}
            out = None
            try:
                out = await asyncio.to_thread(build_request, job.client_protocol, job.kind, job.body, job.endpoint,
                                              self.env)
                await asyncio.wait_for(self._send(out, res), self.timeout_s)
            except TranslationError as e:
                res["error"] = f"refused: {e.message}"
            except (TimeoutError, asyncio.TimeoutError):
                res["error"] = f"no reply within {self.timeout_s:g} s (tokunseba_shadow_timeout_s)"
                res["latency_ms"] = self.timeout_s * 1000
            except _http_error() as e:
                res["error"] = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
            except Exception as e:  # recorded, never raised into the proxy
                log.exception("tokunseba: shadow of %s failed", job.request_id)
                res["error"] = f"tokunseba: shadow failed: {e}"
            row = await asyncio.to_thread(self._row, job, out, res, p)
            await self._write(lambda ledger: ledger.add_shadow(job.request_id, "shadow", **row))
            c = row["comparison"]
            if self.observed is not None and job.stratum is not None:
                self.observed(job.route, c["earn"]["candidate"], job.stratum, c["verdict"], job.started_at,
                              job.request_id)
        except asyncio.CancelledError:
            raise
        except Exception:  # a shadow never breaks the proxy
            log.exception("tokunseba: shadow of %s failed", job.request_id)
        finally:
            self.active -= 1
            self.primaries.pop(job.request_id, None)

    async def _send(self, out, res: dict) -> None:
        t0 = time.monotonic()
        r = await self._client.post(out.url, content=out.body, headers=out.headers)
        res["status"], res["body"] = r.status_code, r.content[:MAX_BODY]
        res["latency_ms"] = round((time.monotonic() - t0) * 1000, 3)

    async def _write(self, write: Callable[[Ledger], object]) -> None:
        """A ledger write, off the event loop (the ledger is thread-safe; writes never raise)."""
        ledger = self._ledger()
        if ledger is not None:
            await asyncio.to_thread(write, ledger)

    @staticmethod
    def _row(job: ShadowJob, out, res: dict, p: _Primary) -> dict:
        """The shadow row: both replies' facts, their comparison, the shadow's usage as reported."""
        ep = job.endpoint
        shadow = Facts(error=res["error"]) if res["error"] else reply_facts(ep.protocol, res["body"], res["status"])
        primary = reply_facts(job.client_protocol, p.body, p.status) if p.error is None and p.status is not None \
            else Facts(error=p.error or "the primary turn got no reply")
        usage = Usage(shadow.usage_protocol, shadow.usage) if shadow.usage and shadow.usage_protocol else None
        comparison = compare(primary, shadow)
        if job.stratum is not None:  # the turn's kind, and whether the candidate answered it as the reference did
            canary = job.role == "canary"  # the client got the candidate's reply; the shadow is the route's target
            comparison["stratum"] = job.stratum
            comparison["verdict"] = verdict(job.schema, job.tools_offered, shadow if canary else primary,
                                            primary if canary else shadow)
            candidate = (job.earn or {}).get("to") or ep.name
            comparison["earn"] = {"role": job.role, "candidate": candidate,
                                  **({k: v for k, v in job.earn.items() if k != "to"} if job.earn else {})}
        return dict(
            started_at=job.started_at, usage=usage, route=job.route, endpoint=ep.name, target_protocol=ep.protocol,
            model=out.model if out else None, origin=f"{job.origin_host}:{job.origin_port}",
            at_original=int(ep.same_host(job.origin_host, job.origin_port)), status=res["status"],
            latency_ms=res["latency_ms"], error=res["error"] or shadow.error,
            dropped=out.dropped if out else None, facts=shadow.to_json(), primary_facts=primary.to_json(),
            comparison=comparison, request_body=job.body, response_body=res["body"] or None,
            primary_body=p.body or None)

    async def close(self) -> None:
        for t in list(self.tasks):
            t.cancel()
        if self._http is not None:
            await self._http.aclose()
