"""Spending caps at run time (issue 40): admission atomic, settlement exact. The budgets
themselves are the rules file's (routing/budgets.py). Other packages import only the names of
``__all__``, from here.

- ``store``: the counters in the ledger's database (SQLite ``BEGIN IMMEDIATE``; PostgreSQL one
  conditional ``UPDATE … RETURNING``), holds with leases, the sweep;
- ``caps``: which budgets a turn falls under, its ``Verdict``, settlement, the words of a reached cap;
- ``cost``: a finished turn's charge (``CostOf``: micro-dollars from its reported usage).
"""

from .caps import Caps, Verdict, limit_message, reset_text
from .check import price_warnings, reachable_models
from .cost import CostOf, Spent, pricing_cost, tokens_of
from .store import Admission, BudgetStore, LedgerAway, WindowRow

__all__ = [
    "Caps", "Verdict", "limit_message", "reset_text", "price_warnings", "reachable_models",
    "CostOf", "Spent", "pricing_cost", "tokens_of",
    "Admission", "BudgetStore", "LedgerAway", "WindowRow",
]
