"""OpenAI Responses API (Codex CLI): paths, detection facts and stop reasons
(protocols.md C.1, C.3, E.3; clients.md §3). Its codec is translate/openai_responses/.
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

# a response's end -> neutral stop reason (E.3): status "completed" ends the turn (a
# function_call item makes it tool_use), "incomplete" says why in incomplete_details.reason
INCOMPLETE_TO_STOP: dict[str, str] = {
    "max_output_tokens": "max_tokens",
    "content_filter": "refusal",
}
# terminal stream events: the response snapshot they carry holds status, output and usage
TERMINAL_EVENTS = ("response.completed", "response.incomplete", "response.failed")
# response.failed / error event code -> the HTTP status it stands for (a stream has none)
CODE_STATUS: dict[str, int] = {
    "context_length_exceeded": 400,
    "invalid_prompt": 400,
    "rate_limit_exceeded": 429,
    "insufficient_quota": 429,
    "usage_not_included": 429,
    "server_error": 500,
}
# neutral stop reason -> (response status, incomplete_details.reason) (E.3)
STOP_TO_STATUS: dict[str, tuple[str, str | None]] = {
    "end_turn": ("completed", None),
    "stop_sequence": ("completed", None),  # which sequence matched has no field: dropped, recorded
    "tool_use": ("completed", None),
    "pause_turn": ("completed", None),  # lossy, as for Chat
    "max_tokens": ("incomplete", "max_output_tokens"),
    "model_context_window_exceeded": ("incomplete", "max_output_tokens"),
    "refusal": ("incomplete", "content_filter"),
}
# error codes Codex acts on (protocols.md C.3): an upstream that said one keeps it
CODEX_ERROR_CODES = frozenset({"context_length_exceeded", "insufficient_quota", "usage_not_included",
                               "rate_limit_exceeded"})
