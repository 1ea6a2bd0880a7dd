"""A real OTLP/HTTP trace receiver for the tests, on a free loopback port: POST /v1/traces
with a protobuf ``ExportTraceServiceRequest`` (gzip or not), decoded with the official
``opentelemetry-proto`` classes; every span kept as a plain dict (name, ids, parent, kind,
times, attributes decoded to Python values). ``wait_for(n)`` waits until n spans came.
"""

from __future__ import annotations

import gzip
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


def _value(v):
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, kind) if kind else None


class OtlpReceiver:
    def __init__(self) -> None:
        self.spans: list[dict] = []
        self.requests = 0
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                if self.headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                req = ExportTraceServiceRequest()
                req.ParseFromString(body)
                outer._add(self.path, req)
                out = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _add(self, path: str, req: ExportTraceServiceRequest) -> None:
        with self._lock:
            self.requests += 1
            for rs in req.resource_spans:
                resource = {kv.key: _value(kv.value) for kv in rs.resource.attributes}
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        self.spans.append({
                            "path": path, "resource": resource, "scope": ss.scope.name, "name": s.name,
                            "trace_id": s.trace_id.hex(), "span_id": s.span_id.hex(),
                            "parent_span_id": s.parent_span_id.hex(), "kind": s.kind,
                            "start": s.start_time_unix_nano, "end": s.end_time_unix_nano,
                            "status": s.status.code,
                            "attributes": {kv.key: _value(kv.value) for kv in s.attributes},
                        })

    def wait_for(self, n: int, timeout: float = 30.0) -> list[dict]:
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                if len(self.spans) >= n:
                    return list(self.spans)
            assert time.monotonic() < deadline, f"{len(self.spans)} spans, expected {n}"
            time.sleep(0.05)

    def __enter__(self) -> "OtlpReceiver":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
