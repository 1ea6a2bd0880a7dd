"""Client facts: where each known client says who is talking (session, agent, background),
how its user-agent names it, and how it takes a base URL instead of the proxy (what
`tokunseba env --base-url` prints). Data only; routing/session_facts.py reads requests with
it, cli/run.py the base-URL settings.

Measured on the pinned clients (README "Who is talking"; docs/dev/clients.md):

- Claude Code 2.1.197 sends ``X-Claude-Code-Session-Id`` on every model call;
  ``x-claude-code-agent-id`` (and ``x-claude-code-parent-agent-id`` for a nested one) on a
  subagent's calls, none on the main agent's; ``x-app: cli``, or ``cli-bg`` for every call of
  a background session (``CLAUDE_CODE_SESSION_KIND=bg``). Its side queries (session title,
  summaries) carry the main agent's headers and declare no tools, where every agent loop
  turn declares its tools.
- Codex CLI 0.171.0 sends ``prompt_cache_key`` (its session id) and ``client_metadata``
  (``session_id``, ``thread_id``, ``turn_id``) in the body, and ``x-codex-turn-metadata``
  (JSON: ``agent_name`` ``/root`` for the main agent, ``/root/<task>`` for a subagent) in a
  header.
- Gemini CLI and the SDKs send no session: their turns are grouped by a fingerprint of the
  conversation's start (``session_facts.fingerprint``).
"""

from __future__ import annotations

import re

# ---- user-agent -> client name and version

# `name/version ...`, `Name/Sub version` (Anthropic/Python 2.16.0), `name/version/extra`
USER_AGENT_RX = re.compile(
    r"^\s*(?P<name>[A-Za-z][\w.\-]*(?:/[A-Za-z][\w.\-]*)?)(?:[/ ]v?(?P<version>\d[\w.+\-]*))?")
# product token (lower-case) -> the client's name as tokunseba reports it
CLIENT_ALIASES: dict[str, str] = {
    "claude-cli": "claude-code",
    "claude-code": "claude-code",
    "codex_exec": "codex",
    "codex_cli_rs": "codex",
    "codex-tui": "codex",
    "geminicli": "gemini-cli",
    "geminicli-tui": "gemini-cli",
    "anthropic/python": "anthropic-python",
    "anthropic/js": "anthropic-js",
    "openai/python": "openai-python",
    "openai/js": "openai-js",
    "google-genai-sdk": "google-genai",
}
CLIENT_PREFIXES: tuple[tuple[str, str], ...] = (("codex_", "codex"), ("geminicli", "gemini-cli"))

# ---- Claude Code
CC_SESSION_HEADER = "x-claude-code-session-id"
CC_AGENT_HEADER = "x-claude-code-agent-id"
CC_PARENT_AGENT_HEADER = "x-claude-code-parent-agent-id"
CC_APP_HEADER = "x-app"
CC_APP_BACKGROUND = "cli-bg"  # every call of a background session (CLAUDE_CODE_SESSION_KIND=bg)
CC_CLIENT = "claude-code"

# ---- Codex
CODEX_CLIENT = "codex"
CODEX_SESSION_KEY = "prompt_cache_key"  # body: the session's id
CODEX_METADATA_KEY = "client_metadata"  # body: session_id, thread_id, turn_id, ...
CODEX_TURN_METADATA_HEADER = "x-codex-turn-metadata"  # JSON: agent_name ("/root"), request_kind, ...
# the main agent's agent_name: "/root" measured on 0.171.0 (its subagents are "/root/<task>");
# the shared fixtures, redacted, show "/main"
CODEX_MAIN_AGENTS = ("/root", "/main")
CODEX_SUBAGENT_HEADER = "x-openai-subagent"  # in the binary, not yet seen on the wire
CODEX_SESSION_HEADERS = ("session-id", "thread-id")

# Bounds on what is recorded of a client's say-so (bad input never grows a ledger row).
MAX_SESSION_CHARS = 128
MAX_AGENT_CHARS = 96
MAX_NAME_CHARS = 64
MAX_VERSION_CHARS = 32

# when-key -> who can say it, and how (shown by `tokunseba check`; a client not listed
# cannot say, and the condition does not match its turns)
VISIBILITY: dict[str, tuple[tuple[str, str], ...]] = {
    "background": (
        (CC_CLIENT, f"{CC_APP_HEADER}: {CC_APP_BACKGROUND} (a background session), or a call declaring no tools "
                    "(a side query: session title, summaries)"),
    ),
    "agent": (
        (CC_CLIENT, f"{CC_AGENT_HEADER} on a subagent's calls, none on the main agent's"),
        (CODEX_CLIENT, f"{CODEX_TURN_METADATA_HEADER} agent_name (/root is the main agent, /root/<task> a subagent)"),
    ),
    "session": (
        (CC_CLIENT, f"header {CC_SESSION_HEADER}"),
        (CODEX_CLIENT, f"body {CODEX_SESSION_KEY} / {CODEX_METADATA_KEY}.session_id"),
        ("others (gemini-cli, SDKs)", "a fingerprint of the conversation's start (fp-…): its first user "
                                      "message(s)"),
    ),
    "login": (  # the openai-responses facts' login_of reads it
        ("openai-responses clients (codex, the SDKs)",
         "chatgpt: the turn goes to chatgpt.com (Codex signed in with ChatGPT) or names a ChatGPT-Account-ID; "
         "api_key: any other Responses turn"),
    ),
}

# ---- base URLs (no proxy, no CA: `tokunseba env --base-url`), measured on the pinned clients
# Claude Code 2.1.197 (and the anthropic SDKs): the base URL without /v1; its key as always
CLAUDE_CODE_BASE_URL_ENV = "ANTHROPIC_BASE_URL"
CLAUDE_CODE_KEY_ENVS = "ANTHROPIC_API_KEY, or ANTHROPIC_AUTH_TOKEN"
# Codex 0.171.0: OPENAI_BASE_URL is not read; a provider of its own with the Responses wire API,
# chosen with -c model_provider=NAME (the built-in "openai" provider cannot be redefined)
CODEX_BASE_URL_PROVIDER = "tokunseba"
CODEX_BASE_URL_KEY_ENV = "OPENAI_API_KEY"
CODEX_WIRE_API = "responses"
# the openai SDKs: OPENAI_BASE_URL, with the API's /v1
OPENAI_SDK_BASE_URL_ENV = "OPENAI_BASE_URL"
OPENAI_SDK_PATH = "/v1"
# Gemini CLI: the variable alone breaks its headless auth unless its settings choose the API key
GEMINI_CLI_BASE_URL_ENV = "GOOGLE_GEMINI_BASE_URL"
GEMINI_CLI_KEY_ENV = "GEMINI_API_KEY"
GEMINI_CLI_API_KEY_AUTH = "gemini-api-key"  # settings.json security.auth.selectedType
