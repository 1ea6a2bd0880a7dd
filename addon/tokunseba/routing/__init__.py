"""Where a turn goes (docs/architecture.md §4).

- ``rules``: the YAML rules file, validated, and ``decide(turn)``;
- ``endpoints``: the endpoints a route sends to, with their credentials;
- ``session_facts``: who is talking (session, agent, background, client) as rules see it;
- ``client_requests``: what the pinned clients send, and the routes they can never match;
- ``shadowable``: which turns a shadow (or a replay) can take, from the protocols' facts.

Contract: pure but for reading the rules file; no mitmproxy.
"""
