"""OpenAI Responses API (Codex CLI): paths and detection facts (protocols.md C.1, clients.md §3).

The translator to and from this protocol is future work; until then a pair involving it is
refused (translate.pair_refusal) unless it is same-protocol (pass-through or retarget).
"""

from __future__ import annotations

PROTOCOL = "openai-responses"
HOSTS = ("api.openai.com",)  # shared with Chat Completions: the path decides
API_PREFIXES = ("/v1",)
# kind -> path under the API prefix. `GET /v1/responses` (Codex's WebSocket upgrade) is not a
# turn: detection only looks at POST. `/v1/responses/input_tokens` is not routed (passes through).
PATHS = {"responses": "/responses"}
QUERIES: dict[str, str] = {}  # kind -> query string the request URL needs
AUTH_HEADER = ("authorization", "Bearer {key}")
KEY_ENV = "OPENAI_API_KEY"
