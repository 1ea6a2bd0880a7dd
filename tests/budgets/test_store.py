"""Where caps are counted (budgets/store.py): admission is atomic — 100 concurrent admissions
against a $5 cap of $0.10 holds hold exactly 50, on SQLite connections and on a real PostgreSQL."""

from __future__ import annotations

import threading
import time

from tokunseba.budgets import BudgetStore

from tests.support.budgets import budgets, FIVE


def _race(stores: list[BudgetStore], b, n: int = 100) -> int:
    """``n`` threads admit at once, spread over ``stores``: how many got a hold."""
    barrier, got = threading.Barrier(n), []

    def one(i: int) -> None:
        s = stores[i % len(stores)]
        barrier.wait()
        got.append(s.admit([(b, "team", True)], request_id=f"r{i}", now=time.time())[0].ok)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(got)


def test_100_concurrent_admissions_on_sqlite_connections_exactly_50_held(tmp_path):
    (b,) = budgets(FIVE)
    stores = [BudgetStore(tmp_path / "l.db", owner=f"p{i}") for i in range(4)]  # four connections, one file
    assert _race(stores, b) == 50
    (w,) = stores[0].windows()
    assert (w.spent, w.held, len(stores[0].holds())) == (0, 5_000_000, 50)


def test_100_concurrent_admissions_on_postgresql_exactly_50_held(pg_server):
    (b,) = budgets(FIVE)
    url = pg_server.url(db=pg_server.fresh_db())
    stores = [BudgetStore(url, owner=f"p{i}") for i in range(2)]
    assert _race(stores, b) == 50
    (w,) = stores[0].windows()
    assert (w.spent, w.held) == (0, 5_000_000)
    assert len(stores[0].holds()) == 50
    stores[1].sweep(time.time() + 10_000)  # every lease out: charged at the hold
    (w,) = stores[0].windows()
    assert (w.spent, w.held) == (5_000_000, 0)
