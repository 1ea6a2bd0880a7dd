"""credentials.redact_text skips SECRET_TEXT's regex for text that holds none of the words
every match contains (``may_hold_secret_text``): the result must be exactly what the regex
alone gives, for any text. Checked on every example the branches were written for, on
generated text built from the words, their neighbours and the characters that case-fold
to ASCII, and on every code point that (?i) could equate with an ASCII letter. And ``scrub``:
credential-like text redacted, ordinary text left alone."""

from __future__ import annotations

import re
import string
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokunseba import credentials
from tokunseba.credentials import KNOWN_SECRETS, REDACTED, SECRET_TEXT, may_hold_secret_text, redact_text, scrub


def regex_alone(s: str) -> str:
    """redact_text as it was: the regex on every text, then the endpoints' own keys."""
    s = SECRET_TEXT.sub(lambda m: next((g for g in m.groups() if g), "") + REDACTED, s)
    return KNOWN_SECRETS.redact_text(s)


SECRETS = [
    "Cookie: session=abc123", "set-cookie is foo", "authorization: Bearer abcdefghijklmnop",
    "x-api-key: sk-ant-api03-abcdefgh", "X-Goog-Api-Key=AIzaSyA1234567890abcdefghij", "api-key: 'zzzzzz'",
    "x-auth-token: t0k3n", "helicone-auth: Bearer x", "cf-aig-authorization: y", "x-portkey-api-key: z",
    "x-custom-token: abc", "x-my-secret = s", "x-signature is s1", "x-foo-key:k", "bearer abc.def",
    "?key=AIzaSy", "&api_key=1", "?apikey=2", "&token=3", "?access-token=4", "&refresh_token=5", "?id-token=6",
    "&auth=7", "?secret=8", "&password=9", "?sig=a", "&signature=b", "?x-goog-api-key=c",
    "sk-ant-abcdefgh12", "sk-abcdefghijklmnop1234", "AIza01234567890123456789", "postgresql://user:pw@host/db",
    "password = hunter2", "PASSWORD=x",
    # the characters (?i) equates with ASCII letters, inside the words
    "\u017fk-abcdefghijklmnop1234", "coo\u212aie: a=b", "x-api-\u212aey: v", "passwor d", "\u0130sk",
    "x-a\u0131-token: q", "AUTHORİZATİON: x",
]
NOT_SECRETS = [
    "tk-1a2b3c4d5e6f7a8b9c0d1e2f claude-code claude-haiku-4-5 → easy-turns → oai · translated 200 · "
    "input_tokens=3 output_tokens=2 cache_read_input_tokens=0 · 0.01 s",
    "promptTokenCount=12 candidatesTokenCount=3 thoughtsTokenCount=0", "tokens: 5", "tokenizer",
    "tokunseba: reloaded rules.yaml: 3 routes", "", "Token: x", "token is y", "x-tokens: 1",
]


def test_every_branch_example_is_redacted_as_by_the_regex_alone():
    for s in SECRETS + NOT_SECRETS:
        for text in (s, s.upper(), s.lower(), f"before {s} after", f"«{s}»"):
            assert redact_text(text) == regex_alone(text), text
    for s in SECRETS[:34]:  # the plain ASCII examples: redacted (the others: where the regex finds them)
        assert may_hold_secret_text(s), s
        assert redact_text(s) != s, s


def test_the_console_line_skips_the_regex():
    assert not may_hold_secret_text(NOT_SECRETS[0]) and not may_hold_secret_text(NOT_SECRETS[1])


def test_the_characters_that_fold_to_ascii_are_exactly_the_four():
    """Every code point that (?i) matches to an ASCII letter (as SECRET_TEXT's literals and
    classes match) is one of the four that send text to the regex."""
    letter = re.compile("(?i)[a-z]")
    folds = {cp for cp in range(128, sys.maxunicode + 1) if letter.fullmatch(chr(cp))}
    assert folds == {ord(c) for c in "\u0130\u0131\u017f\u212a"}
    for cp in folds:
        assert credentials._FOLDS_TO_ASCII.search(chr(cp))
    # s.lower() keeps every position and gives ASCII only for ASCII, but for two of the four
    changed = {cp for cp in range(128, sys.maxunicode + 1)
               if len(chr(cp).lower()) != 1 or any(c.isascii() for c in chr(cp).lower())}
    assert changed == {0x130, 0x212A} and changed <= folds
    assert all(len(chr(cp).lower()) == 1 and chr(cp).lower().isascii() for cp in range(128))
    for a in string.ascii_lowercase:  # literals fold the same way as the class
        lit = re.compile("(?i)" + a)
        assert {cp for cp in range(128, 0x3000) if lit.fullmatch(chr(cp))} <= folds


FRAGMENTS = ["cookie", "set-", "auth", "authorization", "key", "api", "-", "_", "x-", "goog", "token", "tokens",
             "secret", "sig", "signature", "bearer", "basic", "sk-", "ant-", "AIza", "://", ":", "=", "?", "&", "@",
             "password", "is", " ", "  ", "\t", "\n", "'", '"', "→", "·", "é", "\u0130", "\u0131", "\u017f",
             "\u212a", "K", "S", "I", "abcdefghijklmnop", "0123456789", "proxy-", "helicone", "cf-aig-", "portkey",
             "input_", "=3", "/", "#", ";", ","]
texts = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.sampled_from(SECRETS + NOT_SECRETS), st.text(max_size=4)),
                 max_size=14).map("".join)
cased = texts.flatmap(lambda s: st.sampled_from([s, s.upper(), s.lower(), s.title(), s.swapcase()]))


@settings(max_examples=1500, deadline=None)
@given(cased)
def test_redact_text_is_the_regex_alone_on_any_text(s):
    assert redact_text(s) == regex_alone(s)
    if SECRET_TEXT.search(s):
        assert may_hold_secret_text(s)


def test_known_endpoint_keys_are_still_redacted_without_the_regex():
    KNOWN_SECRETS.set(["plainvalue123"])
    try:
        assert redact_text("model plainvalue123 here") == "model <redacted> here"
        assert not may_hold_secret_text("model plainvalue123 here")
    finally:
        KNOWN_SECRETS.set([])


@pytest.mark.parametrize("text,scrubbed", [
    ("Authorization: Bearer abc.def", "Authorization: <redacted>"),
    ("proxy-authorization: Basic dXNlcjpwYXNz", "proxy-authorization: <redacted>"),
    ("x-api-key=foo&b=1", "x-api-key=<redacted>&b=1"),
    ("cookie is 'a=b; c=d'", "cookie is '<redacted>'"),
    ("api-key: sk-ant-xxxxxxxxxxxxx", "api-key: <redacted>"),
    ("GET /v1beta/models?key=AIza123&alt=sse", "GET /v1beta/models?key=<redacted>&alt=sse"),
    ("header x-app is 'cli'", "header x-app is 'cli'"),
    ("the cookie jar is full", "the cookie jar is full"),
])
def test_scrub_text(text, scrubbed):
    assert scrub(text) == scrubbed


def test_scrub_leaves_ordinary_text_alone():
    text = "task-management-system-alpha; a basic tokenizer; desk-lamp-with-a-very-long-name"
    assert scrub({"message": text, "max_tokens": 5, "tokens": 3}) == {"message": text, "max_tokens": 5, "tokens": 3}
