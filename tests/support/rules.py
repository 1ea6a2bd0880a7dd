"""What the rules tests share: the shipped rules files, a local endpoint, turn facts built by hand,
and a fixture that unregisters the Gemini codec (what a pair refusal looks like)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokunseba import translate
from tokunseba.routing import TurnFacts

RULES_DIR = Path(__file__).resolve().parents[2] / "rules"
EXAMPLES = sorted((RULES_DIR / "examples").glob("*.yaml"))

LOCAL = """\
endpoints:
  local:
    protocol: openai
    url: http://127.0.0.1:8000/v1
"""


def facts(**kw) -> TurnFacts:
    base = dict(client="anthropic", model="claude-opus-4-8", tools=False, thinking=False, images=False,
                request_bytes=1000, last_user_text="hello", headers={})
    return TurnFacts(**(base | kw))


# ---------------------------------------------------------------------------------------------
# Load-time warnings: routes some clients can never take


@pytest.fixture
def gemini_unregistered(monkeypatch):
    """Every pair of the four protocols translates; a protocol whose codec is not registered
    is what a pair refusal looks like (the mechanism the rules rely on)."""
    monkeypatch.delitem(translate.CODECS, "gemini")
