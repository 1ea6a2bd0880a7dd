"""The protocol registry (protocols/__init__.py) is the one home of every protocol fact:
each registered protocol has every fact, a codec, and the modules that used to list things
per protocol read the registry (a copy is found by its protocol names)."""

from __future__ import annotations

import ast
import json
import re
from dataclasses import fields
from pathlib import Path

import pytest

from tokunseba import protocols, translate
from tokunseba.protocols.facts import Protocol
from tokunseba.sse import SSEDecoder
from tokunseba.turn.stream_watch import error_event
from tokunseba.turn.plan import LocalResponse

PKG = Path(__file__).resolve().parents[2] / "addon" / "tokunseba"
SHIPPED = ["anthropic", "openai", "openai-responses", "gemini"]


def test_the_four_protocols_are_registered_in_order():
    assert list(protocols.NAMES)[:4] == SHIPPED
    assert list(translate.PROTOCOLS)[:4] == SHIPPED  # a live view of the same registry


@pytest.mark.parametrize("name", SHIPPED)
def test_every_registered_protocol_has_every_fact(name):
    p = protocols.get(name)
    assert isinstance(p, Protocol) and p.name == name and name in translate.CODECS
    assert p.title and p.clients and p.hosts and p.api_prefixes and p.paths
    assert all(k in p.paths for k in p.turn_kinds) and all(k in p.paths for k in p.count_kinds)
    name_h, template = p.auth_header
    assert name_h == name_h.lower() and "{key}" in template and p.key_env
    assert p.usage_counting in ("anthropic", "openai", "gemini") and p.usage_key and p.reply_model_key
    assert p.rule_shape is not None and p.max_output_field
    assert p.terminal_event is None or p.stream_judged
    body = json.loads(p.error_body(429, "slow down", "rate_limit_error"))
    assert "slow down" in json.dumps(body)
    events = SSEDecoder().feed(p.stream_error("it broke"))
    assert len(events) == 1 and "it broke" in events[0].data
    for f in fields(Protocol):  # nothing left at its placeholder default where a fact is due
        if f.name in ("error_body", "stream_error"):
            assert getattr(p, f.name) is not f.default


def test_the_fallback_envelope_is_one_choice_for_whole_errors_and_stream_events():
    """A client protocol nobody named (a request that failed before detection) gets one
    envelope, whole or mid-stream: OpenAI's (it was OpenAI's whole, Gemini's mid-stream)."""
    assert protocols.FALLBACK == "openai"
    whole = json.loads(LocalResponse.error("no-such-protocol", 500, "boom").body)
    assert whole == json.loads(LocalResponse.error("openai", 500, "boom").body)
    assert set(whole["error"]) == {"message", "type", "param", "code"}
    assert error_event("no-such-protocol", "boom") == error_event("openai", "boom")


# ---- no module outside the codecs and protocols/ lists something per protocol ----

ALLOWED = {  # file -> why a protocol name may appear as a literal there
    "protocols/__init__.py": "FALLBACK names the envelope for an unnamed protocol",
    "routing/client_requests.py": "measured requests of the pinned clients: each row names its client's protocol "
                          "(facts about clients, not about a protocol)",
}


def _string_literals(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
            and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return [n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def test_no_protocol_table_outside_the_registry():
    offenders = []
    for f in sorted(PKG.rglob("*.py")):
        rel = f.relative_to(PKG).as_posix()
        if rel.startswith(("translate/", "protocols/")) and rel != "protocols/__init__.py" or rel in ALLOWED:
            continue
        hits = [s for s in _string_literals(f) if s in SHIPPED]
        if hits:
            offenders.append(f"{rel}: {sorted(set(hits))}")
    assert offenders == []


def test_help_describes_every_protocol(capsys):
    """`tokunseba --help` lists the protocols from the registry (it said Anthropic and Chat only)."""
    from tokunseba.cli.main import main

    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for p in protocols.all_protocols():
        assert re.search(rf"^  {re.escape(p.name)} +{re.escape(p.title)} \(", out, re.M), out
    assert "Anthropic Messages and OpenAI Chat Completions," not in out


@pytest.mark.parametrize("target", [t for t in SHIPPED if t != "openai"])
def test_n_above_one_from_a_chat_client_is_refused_the_same_toward_every_target(target):
    """A refusal (the next route may take the turn), never a 400 toward some targets and a
    refusal toward others; a malformed ``n`` is the client's 400 everywhere."""
    from tokunseba.errors import InvalidRequest, Refused

    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}
    with pytest.raises(Refused) as e:
        translate.request("openai", target, {**body, "n": 2}, max_tokens=100)
    assert e.value.status == 400 and e.value.message == "n: 2 choices requested; every other protocol returns exactly one"
    with pytest.raises(InvalidRequest):
        translate.request("openai", target, {**body, "n": "2"}, max_tokens=100)
    assert translate.request("openai", target, {**body, "n": 1}, max_tokens=100).body  # one choice goes


def test_gemini_usage_is_priced_with_its_cached_tokens_once():
    """Gemini's promptTokenCount includes cachedContentTokenCount, as OpenAI's prompt_tokens
    include the cached ones: the cached part is priced at the cache-read price only (it was
    priced twice: as input and as cache read)."""
    from decimal import Decimal

    from tokunseba.pricing import Price, billed_of, usage_cost

    price = Price("gem", "*", {"input": Decimal(1), "cache_read": Decimal("0.25"), "output": Decimal(4)})
    billed = billed_of("gemini", {"promptTokenCount": 1_000_000, "cachedContentTokenCount": 600_000,
                                  "candidatesTokenCount": 100_000})
    cost, _, unpriced = usage_cost(price, billed)
    assert cost == Decimal("0.4") * 1 + Decimal("0.6") * Decimal("0.25") + Decimal("0.1") * 4 and unpriced == {}


# ---- neutral/ names no protocol (issue 28): each protocol's usage counting lives with its facts ----

_PROTOCOL_WORDS = re.compile(r"anthropic|openai|gemini", re.I)


def _code_names(path: Path) -> list[tuple[int, str]]:
    """(line, name) of every identifier, attribute, argument, definition and non-docstring
    string of ``path`` that names a built-in protocol."""
    tree = ast.parse(path.read_text())
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
            and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    out = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Name):
            names = [n.id]
        elif isinstance(n, ast.Attribute):
            names = [n.attr]
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [n.name]
        elif isinstance(n, ast.arg):
            names = [n.arg]
        elif isinstance(n, ast.alias):
            names = [n.name, n.asname or ""]
        elif isinstance(n, ast.ImportFrom):
            names = [n.module or ""]
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs:
            names = [n.value] if n.value in SHIPPED else []  # table rows may describe a protocol's spelling
        else:
            names = []
        out += [(getattr(n, "lineno", 0), s) for s in names if _PROTOCOL_WORDS.search(s) or s in SHIPPED]
    return out


def test_neutral_names_no_protocol():
    """No module of neutral/ imports a protocol module or a codec, names one in its code, or
    holds a protocol name: a protocol with its own usage counting (tests/suites/test_echo_plugin.py)
    edits nothing there."""
    offenders = [f"{f.relative_to(PKG)}:{line}: {name}" for f in sorted((PKG / "neutral").rglob("*.py"))
                 for line, name in _code_names(f)]
    assert offenders == []
    from tests.suites.test_layering import _absolute_imports, _under

    for f in (PKG / "neutral").rglob("*.py"):
        assert not {i for i in _absolute_imports(f) if _under(i, "tokunseba.protocols") or _under(i, "tokunseba.translate")}


def test_every_protocol_brings_or_names_a_registered_counting():
    from tokunseba.neutral.usage import COUNTINGS

    for p in protocols.all_protocols():
        assert p.usage_counting in COUNTINGS, p.name
        assert p.counting is None or COUNTINGS[p.usage_counting] is p.counting
    assert {p.counting.name for p in protocols.all_protocols() if p.counting} == {"anthropic", "openai", "gemini"}
