"""The proxy path: from mitmproxy's hooks to the endpoint and back (docs/architecture.md §2).

- ``mitm``: the mitmproxy addon, the only module that imports mitmproxy: its hooks and the
  glue between them, over the plain parts below;
- ``disposition``: what the ``response`` hook does with a reply (one pure decision);
- ``target``, ``presentation``, ``recorder``, ``shadowing``, ``options``, ``next_attempt``: where
  a request goes (and which are provider calls), what mitmweb shows of a turn, a turn's
  ledger records in order, its shadow, the addon's options, a failed attempt and the next;
- ``relay``: the loopback relay a routed turn goes through (its connections to endpoints,
  keep-alives, failover hand-off), with ``http1`` (the HTTP/1.1 it speaks);
- ``attempts``, ``failover``, ``capacity``: a turn's attempts, which failures move it to the
  next route, and each endpoint's concurrency limit;
- ``pump``, ``encoding``, ``stream_watch``, ``outcome``: a reply on its way to the client
  (streamed through the translator, content encodings, what a passed-on stream reports,
  the turn's outcome);
- ``flowstate``, ``access``: what tokunseba holds per flow; who may use the proxy;
- ``provider_reach``, ``endpoint_startup``, ``console_line``, ``otel_spans``: what the user
  sees — an unreachable provider said in the client's protocol, endpoints checked at start,
  one console line per turn, a span per turn.

Contract: everything but ``mitm`` is plain Python, testable without mitmproxy.
"""
