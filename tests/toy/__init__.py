"""A fifth protocol that exists only for tests/suites/test_toy_protocol.py: its facts (facts.py) and
its codec (codec.py), registered by the test alone. Nothing in addon/ names it."""
