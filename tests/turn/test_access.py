"""Who may spend the endpoints' keys (turn/access.py): loopback clients, or any client once
proxyauth or --allow-remote opts in."""

from __future__ import annotations


def test_may_spend_keys_only_for_loopback_or_opt_in():
    from tokunseba.turn.access import may_spend_keys

    assert may_spend_keys("127.0.0.1", proxyauth=False, allow_remote=False)
    assert may_spend_keys("::ffff:127.0.0.1", proxyauth=False, allow_remote=False)
    assert not may_spend_keys("192.168.1.77", proxyauth=False, allow_remote=False)
    assert may_spend_keys("192.168.1.77", proxyauth=True, allow_remote=False)
    assert may_spend_keys("192.168.1.77", proxyauth=False, allow_remote=True)
