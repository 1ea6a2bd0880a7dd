"""Subscription-window headers as the providers send them (Anthropic's as Claude Code reads them,
the ChatGPT backend's as Codex reads them) at a fixed now: shared by the window reader's tests
(tests/protocols/test_limits.py) and the quota tests (tests/routing/test_quota.py)."""

from __future__ import annotations

NOW = 1_800_000_000.0

# as Claude Code's cli.js reads them: shares 0..1, resets in Unix seconds
ANTHROPIC = {
    "anthropic-ratelimit-unified-status": "allowed",
    "anthropic-ratelimit-unified-reset": str(int(NOW) + 3600),
    "anthropic-ratelimit-unified-representative-claim": "five_hour",
    "anthropic-ratelimit-unified-5h-utilization": "0.85",
    "anthropic-ratelimit-unified-5h-reset": str(int(NOW) + 3600),
    "anthropic-ratelimit-unified-5h-status": "allowed_warning",
    "anthropic-ratelimit-unified-7d-utilization": "0.31",
    "anthropic-ratelimit-unified-7d-reset": str(int(NOW) + 86400 * 3),
    "anthropic-ratelimit-unified-7d-status": "allowed",
    "anthropic-ratelimit-unified-overage-status": "rejected",
    "anthropic-ratelimit-unified-overage-disabled-reason": "org_level_disabled",
}
# as openai/codex codex-rs/codex-api/src/rate_limits.rs reads them: percent 0..100, reset-at in Unix seconds
CODEX = {
    "x-codex-primary-used-percent": "42.5",
    "x-codex-primary-window-minutes": "300",
    "x-codex-primary-reset-at": str(int(NOW) + 7200),
    "x-codex-secondary-used-percent": "13",
    "x-codex-secondary-window-minutes": "10080",
    "x-codex-secondary-reset-after-seconds": "600000",
}


def by_name(reading):
    return {w.name: w for w in reading.windows}


U = "anthropic-ratelimit-unified-"

# a route to a local endpoint while Anthropic's windows are over 0.8 used
QUOTA_RULES = """
endpoints:
  local: {protocol: openai, url: "http://127.0.0.1:9/v1", model: small}
routes:
  - name: easy-local-when-busy
    when: {client: anthropic, model: "*haiku*", quota: {above: 0.8}}
    to: local
"""
