"""What a provider's reply says about the account's limits (proxy/provider_limits.py): the headers
under a registered protocol's ``limit_headers`` prefixes, lower-cased, in order; never one whose
name says it holds a credential."""

from __future__ import annotations

from tokunseba.proxy.provider_limits import EVENT, limit_headers, limit_prefixes


def test_the_codex_limit_headers_are_kept_in_order_lower_cased():
    assert "x-codex-" in limit_prefixes()
    fields = [("Content-Type", "text/event-stream"), ("X-Codex-Primary-Used-Percent", "12"),
              ("x-request-id", "req_1"), ("x-codex-primary-reset-at", "1765000000"),
              ("x-codex-secondary-window-minutes", "10080")]
    assert limit_headers(fields) == [["x-codex-primary-used-percent", "12"], ["x-codex-primary-reset-at", "1765000000"],
                                     ["x-codex-secondary-window-minutes", "10080"]]


def test_a_limit_header_named_as_a_credential_is_never_kept():
    fields = [("x-codex-api-key", "sk-SECRET"), ("x-codex-authorization", "Bearer SECRET"),
              ("x-codex-primary-used-percent", "3")]
    assert limit_headers(fields) == [["x-codex-primary-used-percent", "3"]]


def test_headers_under_no_registered_prefix_are_not_kept():
    assert limit_prefixes() == ("x-codex-",)  # the one protocol registering limit headers today
    assert limit_headers([("content-type", "application/json"), ("anthropic-ratelimit-requests-limit", "50"),
                          ("x-ratelimit-remaining-tokens", "9000")]) == []
    assert limit_headers([]) == []
    assert EVENT == "provider_limits"
