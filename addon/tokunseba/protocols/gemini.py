"""Google Gemini (generativelanguage API): paths and detection facts (protocols.md D).

The translator to and from this protocol is future work; until then a pair involving it is
refused (translate.pair_refusal) unless it is same-protocol (pass-through or retarget).
"""

from __future__ import annotations

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
