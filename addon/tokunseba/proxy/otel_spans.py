"""Every turn as an OpenTelemetry span, exported over OTLP/HTTP (GenAI semantic conventions).

- On when a collector is named: the ``tokunseba_otlp_endpoint`` option (``run
  --otlp-endpoint URL``: the base URL, ``/v1/traces`` added as the OTLP spec says), else the
  standard ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_ENDPOINT`` (the SDK
  reads them, with ``OTEL_EXPORTER_OTLP_HEADERS``, ``..._TIMEOUT``, ``OTEL_SERVICE_NAME``,
  ``OTEL_RESOURCE_ATTRIBUTES``). Needs the ``otel`` extra; without it one warning, no spans.
- One span per turn, made where the turn's end is recorded (``TurnSpans.turn_done``, called
  by proxy/mitm.py beside the ledger): it starts when the turn started and ends when it ended;
  kind CLIENT; named ``"{gen_ai.operation.name} {gen_ai.request.model}"``. Its attributes
  are ``attributes()``'s (a table below, a reason per row); a fact not known is absent,
  never guessed (usage exactly as reported: no usage reported, no usage attribute).
- A client's W3C ``traceparent`` (and ``tracestate``) makes the span its child; without one
  the span starts a trace.
- Export is the SDK's ``BatchSpanProcessor``: the event loop only hands it the finished span
  (a bounded queue; when full the SDK drops spans); its own thread sends them. A collector
  that is down or slow costs the turn nothing; its failures are logged at most once a minute.
- No prompt or reply text unless the user opts in (``tokunseba_otlp_bodies``, like
  ``--ledger-bodies``): then the request and the reply as the client sent and got them, as
  ``tokunseba.request.body`` / ``tokunseba.response.body``, key-like text redacted, at most
  ``MAX_BODY`` characters each.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

from ..addresses import collector_problem as endpoint_problem

from .. import protocols
from ..neutral import Usage
from ..credentials import redact_text
from ..states import Action

log = logging.getLogger("tokunseba")

MAX_BODY = 16_384
EXPORT_LOG_EVERY_S = 60.0



def _operation(client: str) -> str:
    """gen_ai.operation.name of a turn of ``client`` protocol (its facts' genai_operation)."""
    facts = protocols.find(client)
    return facts.genai_operation if facts is not None else "chat"


def _provider(target: str | None) -> str | None:
    """gen_ai.provider.name of an upstream asked in ``target`` protocol (its facts' genai_provider)."""
    facts = protocols.find(target)
    return facts.genai_provider if facts is not None else None

# attribute -> where its value comes from (why it is there)
ATTRIBUTES: dict[str, str] = {
    "gen_ai.operation.name": "chat; generate_content for Gemini (semconv's names for these calls)",
    "gen_ai.provider.name": "the API the upstream was asked in (anthropic, openai, gcp.gemini)",
    "gen_ai.request.model": "the model the client asked for",
    "gen_ai.response.model": "the model the reply named (the upstream's), translated, retargeted or passed on: a "
                             "whole reply's model (Gemini modelVersion), a stream's first event; absent when none",
    "gen_ai.usage.input_tokens": "input as the upstream reported it (OpenAI's includes cached tokens)",
    "gen_ai.usage.output_tokens": "output as the upstream reported it",
    "gen_ai.response.finish_reasons": "the stop reason the reply carried, when read",
    "server.address": "the host the turn went to (the endpoint's, or the provider's)",
    "server.port": "that host's port",
    "http.response.status_code": "the status the client got",
    "error.type": "set when the turn failed: its outcome's reason class (the status, or 'error')",
    "tokunseba.request_id": "the ledger's request id (tokunseba explain ID)",
    "tokunseba.route": "the rule that routed the turn",
    "tokunseba.endpoint": "the endpoint it went to",
    "tokunseba.client_protocol": "the protocol the client spoke",
    "tokunseba.target_protocol": "the protocol the upstream was asked in",
    "tokunseba.outcome": "as the ledger counts it: translated, pass_through, retargeted, refused, error, cancelled",
    "tokunseba.fields_dropped": "request and reply fields the translation could not carry (count)",
    "tokunseba.failover.attempts": "attempts the turn took, when it failed over",
    "tokunseba.instance": "which proxy served it",
    "tokunseba.stream": "whether the reply was streamed",
    "tokunseba.cost_usd": "what the usage as reported cost, USD (pricing/: your table, an endpoint on this machine 0, "
                          "the price library); absent when unpriced or no usage was reported",
    "tokunseba.cost_source": "where that price came from, as explain names it ('unpriced: ...' when nobody prices it)",
}


class TurnSpans:
    """The span exporter of one proxy (``from_settings``); ``turn_done`` per turn, ``close`` at the end."""

    def __init__(self, endpoint: str | None, *, bodies: bool = False, instance: str | None = None) -> None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.trace import SpanKind
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        attrs = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": "tokunseba"}
        self.provider = TracerProvider(resource=Resource.create(attrs))
        if endpoint:
            url = endpoint.rstrip("/")
            exporter = OTLPSpanExporter(endpoint=url if url.endswith("/v1/traces") else url + "/v1/traces")
        else:
            exporter = OTLPSpanExporter()
        self.where = getattr(exporter, "_endpoint", endpoint or "")
        self.provider.add_span_processor(BatchSpanProcessor(exporter))
        self.tracer = self.provider.get_tracer("tokunseba")
        self.kind = SpanKind.CLIENT
        self.propagator = TraceContextTextMapPropagator()
        self.bodies = bodies
        self.instance = instance
        _quiet_export_errors()

    def turn_done(self, turn: Any, *, outcome: str | None, status: int | None, usage: Usage | None, details: dict,
                  end: float, attempts: int | None = None, response_model: str | None = None,
                  traceparent: str | None = None,
                  tracestate: str | None = None, response_body: bytes | None = None, cost: Any = None) -> None:
        """One finished span for one turn (never raises: a span is never worth a turn)."""
        try:
            attributes = self.attributes(turn, outcome=outcome, status=status, usage=usage, details=details,
                                         attempts=attempts)
            if response_model:
                attributes["gen_ai.response.model"] = response_model
            if cost is not None and cost.kind != "no_usage":  # pricing.Cost: a float leaves here, never summed
                attributes["tokunseba.cost_source"] = cost.source
                if cost.usd is not None:
                    attributes["tokunseba.cost_usd"] = float(cost.usd)
            if self.bodies:
                attributes["tokunseba.request.body"] = _body(turn.original_body)
                if response_body is not None:
                    attributes["tokunseba.response.body"] = _body(response_body)
            parent = None
            if traceparent:
                carrier = {"traceparent": traceparent, **({"tracestate": tracestate} if tracestate else {})}
                parent = self.propagator.extract(carrier)
            name = f"{attributes['gen_ai.operation.name']} {turn.requested_model or ''}".rstrip()
            span = self.tracer.start_span(name, context=parent, kind=self.kind, attributes=attributes,
                                          start_time=int(turn.started_at * 1e9))
            if "error.type" in attributes:
                from opentelemetry.trace import Status, StatusCode

                span.set_status(Status(StatusCode.ERROR, (turn.error or "")[:200] or None))
            span.end(end_time=int(end * 1e9))
        except Exception as e:  # pragma: no cover (a bug here must not cost the turn)
            log.warning("tokunseba: no span for turn %s: %s", getattr(turn, "request_id", "?"), e)

    def attributes(self, turn: Any, *, outcome: str | None, status: int | None, usage: Usage | None,
                   details: dict, attempts: int | None) -> dict[str, Any]:
        target = turn.target_protocol or turn.client_protocol
        d = turn.decision
        a: dict[str, Any] = {
            "gen_ai.operation.name": _operation(turn.client_protocol),
            "tokunseba.request_id": turn.request_id,
            "tokunseba.client_protocol": turn.client_protocol,
            "tokunseba.outcome": outcome or "unfinished",
            "tokunseba.stream": bool(turn.stream),
        }
        optional = {
            "gen_ai.provider.name": _provider(target),
            "gen_ai.request.model": turn.requested_model,
            "tokunseba.route": d.route.name if d is not None and d.route is not None else None,
            "tokunseba.endpoint": turn.endpoint.name if turn.endpoint is not None else None,
            "tokunseba.target_protocol": turn.target_protocol,
            "tokunseba.instance": self.instance,
            "http.response.status_code": status,
            "tokunseba.failover.attempts": attempts,
        }
        a.update({k: v for k, v in optional.items() if v is not None})
        host, port = _server(turn)
        if host:
            a["server.address"] = host
            if port:
                a["server.port"] = port
        if usage is not None and isinstance(usage.reported, dict):
            counted = usage.fields()
            if counted.get("input") is not None:
                a["gen_ai.usage.input_tokens"] = counted["input"]
            if counted.get("output") is not None:
                a["gen_ai.usage.output_tokens"] = counted["output"]
        if details.get("stop_reason"):
            a["gen_ai.response.finish_reasons"] = [str(details["stop_reason"])]
        dropped = len(details.get("dropped") or ()) + len(getattr(turn.translation, "dropped", None) or ())
        if turn.translation is not None or details.get("dropped") is not None:
            a["tokunseba.fields_dropped"] = dropped
        if outcome in ("error", "refused") or (status or 0) >= 400:
            a["error.type"] = str(status) if status and status >= 400 else (outcome or "error")
        return a

    def close(self, timeout_s: float = 2.0) -> None:
        """Send what is queued and stop the exporter, waiting at most ``timeout_s`` (a
        collector that is down never holds the proxy's stop: its spans are given up)."""
        def stop() -> None:
            try:
                self.provider.force_flush(int(timeout_s * 1000))
                self.provider.shutdown()
            except Exception as e:  # pragma: no cover
                log.warning("tokunseba: stopping the span exporter failed: %s", e)

        t = threading.Thread(target=stop, name="tokunseba-spans-stop", daemon=True)
        t.start()
        t.join(timeout_s)


def _server(turn: Any) -> tuple[str | None, int | None]:
    ep = turn.endpoint
    if ep is not None and turn.action != Action.PASS:
        from urllib.parse import urlsplit

        try:
            parts = urlsplit(ep.url)
            return parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            return None, None
    return turn.host, None


def _body(raw: bytes | str | None) -> str:
    text = raw.decode("utf-8", "replace") if isinstance(raw, (bytes, bytearray)) else (raw or "")
    return redact_text(text[:MAX_BODY])


class _EveryMinute(logging.Filter):
    """The exporter's failures (collector down): the first, then at most one a minute."""

    def __init__(self) -> None:
        super().__init__()
        self.last = -EXPORT_LOG_EVERY_S

    def filter(self, record: logging.LogRecord) -> bool:
        now = time.monotonic()
        if now - self.last < EXPORT_LOG_EVERY_S:
            return False
        self.last = now
        return True


_FILTER = _EveryMinute()


def _quiet_export_errors() -> None:
    """On every logger of the SDK and its exporter (names differ between versions; a logger's
    filter sees only its own records), and urllib3's (its retries)."""
    names = [n for n in logging.root.manager.loggerDict if n.startswith("opentelemetry")]
    for name in [*names, "urllib3.connectionpool"]:
        lg = logging.getLogger(name)
        if _FILTER not in lg.filters:
            lg.addFilter(_FILTER)


def collector_named(option: str | None) -> str | None:
    """The collector spans go to: the option, else the standard environment variables; None:
    off (also when OTEL_SDK_DISABLED=true, as the SDK's own switch)."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    return (option or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or None)


def from_settings(option: str | None, *, bodies: bool = False, instance: str | None = None) -> TurnSpans | None:
    """The span exporter the settings ask for, or None (no collector named, or no SDK: said once)."""
    where = collector_named(option)
    if where is None:
        return None
    if problem := endpoint_problem(where):
        log.error("tokunseba: no spans: %s", problem)
        return None
    try:
        spans = TurnSpans(option or None, bodies=bodies, instance=instance)
    except ImportError:
        log.warning("tokunseba: spans for %s need the OpenTelemetry SDK: pip install 'tokunseba[otel]'; "
                    "no spans are sent", where)
        return None
    log.info("tokunseba: one span per turn to %s%s", spans.where, " (with request and reply text)" if bodies else "")
    return spans
