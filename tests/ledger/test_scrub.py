"""The ledger's memoized scrubbing gives exactly ``jsonc.dumps(scrub(value))`` for any JSON
value, forgets everything when the endpoints' keys change, and still scrubs what JSON
cannot encode as it stands."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tokunseba import jsonc; from tokunseba.ledger import scrub as ledger_scrub
from tokunseba.ledger.scrub import scrubbed_json
from tokunseba.credentials import KNOWN_SECRETS, scrub

texts = st.sampled_from(["x-app", "cli", "Bearer sk-ant-api03-SECRETSECRET", "key=AIzaSyD-SECRET-GOOGLE-KEY-123",
                         "header authorization is 'Bearer tok-123456'", "local-plain-secret", "ordinary words"])
keys = st.sampled_from(["route", "reasons", "api_key", "x-api-key", "headers", "response_headers", "Cookie",
                        "usage", "access_token", "data"])
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) | st.floats(allow_nan=False) | texts | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4)
    | st.lists(st.tuples(texts, texts), max_size=3),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(value=json_values)
def test_memoized_is_exactly_scrub(value):
    want = jsonc.dumps(scrub(value))
    assert scrubbed_json(value) == want
    assert scrubbed_json(value) == want  # and again, from the memo


def test_a_new_endpoint_key_empties_the_memo():
    value = {"reasons": ["model is my-endpoint-key-123456"]}
    before = KNOWN_SECRETS.values
    try:
        assert "my-endpoint-key-123456" in scrubbed_json(value)  # not key-shaped: kept, and remembered
        KNOWN_SECRETS.set(["my-endpoint-key-123456"])
        assert "my-endpoint-key-123456" not in scrubbed_json(value)
    finally:
        KNOWN_SECRETS.set(before)


def test_values_json_cannot_encode_are_still_scrubbed():
    value = {"body": b"Authorization: Bearer sk-ant-api03-SECRETSECRET", 1: "sk-proj-SECRETSECRETSECRET42"}
    out = scrubbed_json(value)
    assert "SECRET" not in out and out == jsonc.dumps(scrub(value))


def test_the_memo_is_bounded():
    for i in range(ledger_scrub.MAX_ENTRIES + 50):
        scrubbed_json({"n": i})
    assert len(ledger_scrub._memo) <= ledger_scrub.MAX_ENTRIES
