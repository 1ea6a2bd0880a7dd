"""The cost of a ledger row (pricing/rows.py): its endpoint — the route's, else the built-in one of
the host the client asked for — and its URL — the routed one, else a built-in endpoint's, else
``https://HOST`` of a turn passed through; a shadow priced by its own model."""

from __future__ import annotations

from tokunseba.pricing import Source, endpoint_of, routed_url, row_cost, shadow_cost
from tokunseba.pricing.rows import model_of, url_of
from tokunseba.routing import BUILTIN_ENDPOINTS


def test_the_endpoint_of_a_row():
    assert endpoint_of({"endpoint": "local", "host": "api.anthropic.com"}) == "local"
    assert endpoint_of({"endpoint": None, "host": "api.anthropic.com"}) == "anthropic"
    assert endpoint_of({"host": "llm.corp.example"}) == "llm.corp.example"  # no built-in endpoint: the host


def test_the_url_the_turn_went_to():
    events = [{"kind": "routed", "data": {"endpoint": "local", "url": "http://127.0.0.1:8080/v1"}},
              {"kind": "completed", "data": {}},
              {"kind": "routed", "data": {"endpoint": "local", "url": "http://127.0.0.1:8081/v1"}},
              {"kind": "routed", "data": {"endpoint": "other", "url": "http://127.0.0.1:9/v1"}}]
    assert routed_url(events, "local") == "http://127.0.0.1:8081/v1"  # the last one at that endpoint
    assert routed_url(events, "nowhere") is None and routed_url([], "local") is None
    assert url_of({"endpoint": "local"}, "http://127.0.0.1:8081/v1") == "http://127.0.0.1:8081/v1"
    assert url_of({"endpoint": "anthropic"}) == BUILTIN_ENDPOINTS["anthropic"].url
    assert url_of({"endpoint": None, "host": "llm.corp.example"}) == "https://llm.corp.example"
    assert url_of({"endpoint": "mine"}) is None  # a user's endpoint with no routed event: unknown


def test_the_model_of_a_row_is_the_one_used_else_the_one_asked():
    assert model_of({"model_used": "qwen3", "requested_model": "claude-haiku-4-5"}) == "qwen3"
    assert model_of({"requested_model": "claude-haiku-4-5"}) == "claude-haiku-4-5"


def test_a_turn_routed_to_loopback_costs_nothing_and_one_without_usage_nothing_known():
    row = {"endpoint": "local", "host": "api.anthropic.com", "model_used": "qwen3", "started_at": 1000.0,
           "usage_protocol": "openai", "usage_reported": {"prompt_tokens": 300, "completion_tokens": 12}}
    cost = row_cost(row, [], routed="http://127.0.0.1:8080/v1")
    assert (cost.kind, cost.usd) == (Source.LOCAL, 0)
    assert row_cost({**row, "usage_reported": None}, [], routed="http://127.0.0.1:8080/v1").kind is Source.NO_USAGE


def test_a_shadow_is_priced_by_its_own_model_at_its_endpoint():
    shadow = {"endpoint": "anthropic", "model": None, "primary_requested_model": "my-finetune-7", "started_at": 0,
              "host": "api.anthropic.com", "usage_protocol": "anthropic",
              "usage_reported": {"input_tokens": 5, "output_tokens": 1}}
    cost = shadow_cost(shadow, [])
    assert cost.kind is Source.UNPRICED and cost.source == "unpriced: no price for my-finetune-7 at anthropic"
