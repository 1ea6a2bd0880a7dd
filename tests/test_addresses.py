"""Which addresses are this machine (addresses.py): loopback in IPv4, IPv6 and v4-mapped form;
nothing else, and nothing for no address."""

from __future__ import annotations

from tokunseba.addresses import is_loopback


def test_loopback_addresses():
    assert all(map(is_loopback, ["127.0.0.1", "127.8.9.1", "::1", "::ffff:127.0.0.1"]))
    assert not any(map(is_loopback, ["192.168.1.20", "10.0.0.2", "::ffff:10.0.0.2", "fe80::1%eth0", "", None]))
