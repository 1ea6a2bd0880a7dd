"""``plan_request``: a turn planned in one call (prepare, decide, build), for the tests.

The product plans in three steps because the adapter (proxy/mitm.py ``_plan``) opens the routed
turn's upstream connection between deciding and building (passive health: a failed connect
rules the endpoint out and the turn is decided again). Tests that need no connection plan
with this composition of the same three steps, all endpoints reachable unless told.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from tokunseba.routing.endpoints import Endpoint
from tokunseba.routing import Rules
from tokunseba.turn.plan import Turn, build_turn, decide_request, prepare_request


def plan_request(
    rules: Rules,
    *,
    method: str,
    host: str,
    port: int,
    path: str,
    headers: Iterable[tuple[str, str]],
    body: bytes,
    env: Mapping[str, str],
    reachable: Callable[[Endpoint], bool] | None = None,
    extra_hosts: Mapping[str, str] | None = None,
    now: float | None = None,
) -> Turn | None:
    """prepare + decide + build in one call. None: not a provider call (leave it untouched)."""
    prep = prepare_request(method=method, host=host, port=port, path=path, headers=headers, body=body,
                           extra_hosts=extra_hosts)
    if prep is None:
        return None
    plan = decide_request(rules, prep, reachable) if prep.req is not None else None
    return build_turn(rules, prep, plan, env=env, now=now)
