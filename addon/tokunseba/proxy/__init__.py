"""The proxy path: mitmproxy's hooks, the sockets, and what the running proxy holds
(docs/dev/architecture.md §3). What a turn *is* (its plan, its reply, its failover) is turn/'s,
plain; this package is the adapter around it.

- ``mitm``: the addon mitmproxy loads: one ``core.Core`` and the parts chained over it;
- ``core``: what the parts share, below them all (the running proxy's state, flow helpers);
- ``route``, ``reply``, ``record``, ``web``: the parts, each owning its options: a request
  planned and applied (and a failed attempt's next one), a reply on its way back, a turn's
  end written (ledger, spans, shadows, console line), what mitmweb and the terminal show;
- ``relay`` with ``http1``: the loopback relay a routed turn goes through (its connections
  to endpoints, keep-alives, failover hand-off) and the HTTP/1.1 it speaks;
- ``provider_reach``: hosts reached before a turn leaves (a passed-through provider host,
  the endpoints in use at start);
- ``recorder``: a turn's ledger records, in order; ``shadowing``: a turn's shadow;
  ``otel_spans``: a span per turn; ``options``: the addon's options, as data.

Contract: only the adapter (``mitm``, ``core`` and the parts) imports mitmproxy; the rest is
plain Python (asyncio and sockets where it talks to the network).
"""
