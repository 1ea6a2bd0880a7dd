"""Google Gemini (generativelanguage API): paths, detection facts and the error envelope
(protocols.md D).

Its codec is not registered yet (translate.pairs() says so): a pair involving it is
refused unless it is same-protocol (pass-through or retarget).
"""

from __future__ import annotations

from .. import jsonc

PROTOCOL = "gemini"
HOSTS = ("generativelanguage.googleapis.com",)
API_PREFIXES = ("/v1beta", "/v1")
# kind -> path under the API prefix; the model travels in the path, not the body.
PATHS = {
    "generate": "/models/{model}:generateContent",
    "stream_generate": "/models/{model}:streamGenerateContent",
    "count": "/models/{model}:countTokens",
}
QUERIES = {"stream_generate": "alt=sse"}  # without it the stream is one JSON array, not SSE
AUTH_HEADER = ("x-goog-api-key", "{key}")
KEY_ENV = "GEMINI_API_KEY"

# HTTP status -> error.status (google.rpc.Code names); any other status -> UNKNOWN_STATUS.
ERROR_STATUS: dict[int, str] = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
UNKNOWN_STATUS = "UNKNOWN"


def error_body(status: int, message: str) -> bytes:
    """A JSON error body: ``{"error":{"code":status,"message":…,"status":…}}``."""
    return jsonc.dumpb({"error": {"code": status, "message": message,
                                  "status": ERROR_STATUS.get(status, UNKNOWN_STATUS)}})
