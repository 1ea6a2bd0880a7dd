"""Gemini's protocol facts (protocols/gemini.py): its error envelope, the status word for each
HTTP status, and the compact body it is sent as."""

from __future__ import annotations

import json

from tokunseba.protocols import gemini as pg


def test_gemini_error_body():
    assert json.loads(pg.error_body(429, "Resource has been exhausted (e.g. check quota).")) == {
        "error": {"code": 429, "message": "Resource has been exhausted (e.g. check quota).",
                  "status": "RESOURCE_EXHAUSTED"}}
    assert {s: json.loads(pg.error_body(s, "x"))["error"]["status"] for s in (400, 401, 403, 404, 500, 502, 503, 504)} \
        == {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
            500: "INTERNAL", 502: "UNAVAILABLE", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}
    assert json.loads(pg.error_body(418, "teapot")) == {"error": {"code": 418, "message": "teapot", "status": "UNKNOWN"}}
    assert pg.error_body(400, "ü \"q\"") == '{"error":{"code":400,"message":"ü \\"q\\"","status":"INVALID_ARGUMENT"}}'.encode()
