"""Where a turn goes (docs/dev/architecture.md §4). Other packages import only the names of
``__all__``, from here (``from ..routing import load_rules``); tests of a module's internals
import that module.

- ``rules``: the rule model (``Route``, ``Rules``, the policy enums) and ``decide(rules, facts)``
  -> ``Decision`` with its trace of ``Tried`` routes;
- ``facts``: the facts of a turn rules look at (``turn_facts``), and the ``when`` predicates,
  one row each (a new predicate is one edit there);
- ``rules_file``: the YAML rules file, validated (``load_rules``), its load-time warnings,
  ``check_file``; ``yaml_reader``: the node walker it (and pricing/table.py) reads YAML with;
- ``budgets``: the spending caps a rules file states (``budgets:``), read and checked;
- ``rules_text``: what ``check`` and ``models`` print of the rules;
- ``endpoints``: the endpoints a route sends to, with their credentials;
- ``accepts``: the content an endpoint takes;
- ``session_facts``: who is talking (session, agent, background, client) as rules see it;
- ``client_requests``: what the pinned clients send, and the routes they can never match;
- ``strata``: the kind of turn a shadow comparison is kept under; ``earn``: earned routes, the
  state of each stratum (``EarnBook``) and the Wilson bound;
- ``shadowable``: which turns a shadow (or a replay) can take, from the protocols' facts;
- ``quota``: subscription windows: the account a turn spends, the last states seen, the
  ``quota`` predicate's check and a rejected window's gate.

Contract: pure but for reading the rules file; no mitmproxy.
"""

from .budgets import MICROS, Budget, BudgetSettings, OnLedgerUnavailable, OnLimit, Unit, Window, money
from .client_requests import never_matching, too_big
from .earn import Earn, EarnBook, EarnCall, EarnState, Standing, earn_of, earn_rows, wilson_lower
from .endpoints import BUILTIN_ENDPOINTS, Endpoint, EndpointHealth
from .quota import (
    EVENT_ROUTED, SHORT as ACCOUNT_SHORT, Account, AccountQuota, QuotaBoard, account_of, gate as quota_gate, humane,
    routed_by_quota, routed_line, thresholds as quota_thresholds,
)
from .facts import PREDICATES, Predicate, TurnFacts, content_refused, turn_facts, turn_refusal
from .rules import (
    Decision, OnFailure, OnRefused, OnUnreachable, Route, Rules, RulesError, ToolLoops, Tried, Unmatched, decide,
    records,
)
from .rules_file import check_file, load_rules, load_rules_text
from .rules_text import accepts_lines, budget_lines, budget_scope_text, caps_of_endpoint, counts_line, policy_lines, who_lines
from .session_facts import Speaker, client_of, speaker
from .strata import SIZE_BUCKETS, Stratum, stratum_of
from .shadowable import shadow_refusal, shadowable, target_kind
from .yaml_reader import YamlReader

__all__ = [
    # the rules and a decision
    "Route", "Rules", "RulesError", "Decision", "Tried", "decide", "records",
    "OnRefused", "OnFailure", "OnUnreachable", "Unmatched", "ToolLoops",
    # a turn's facts and the predicates
    "TurnFacts", "turn_facts", "turn_refusal", "content_refused", "Predicate", "PREDICATES",
    "Speaker", "speaker", "client_of",
    # the rules file and what check prints
    "load_rules", "load_rules_text", "check_file", "YamlReader",
    "counts_line", "policy_lines", "who_lines", "accepts_lines", "never_matching", "too_big",
    "budget_lines", "budget_scope_text", "caps_of_endpoint",
    # spending caps (routing/budgets.py)
    "Budget", "BudgetSettings", "OnLimit", "OnLedgerUnavailable", "Unit", "Window", "MICROS", "money",
    # subscription windows
    "Account", "AccountQuota", "QuotaBoard", "account_of", "quota_gate", "quota_thresholds", "routed_by_quota",
    "routed_line", "EVENT_ROUTED", "ACCOUNT_SHORT", "humane",
    # endpoints and shadows
    "Endpoint", "EndpointHealth", "BUILTIN_ENDPOINTS", "shadow_refusal", "shadowable", "target_kind",
    # earned routes
    "Earn", "EarnBook", "EarnCall", "EarnState", "Standing", "Stratum", "stratum_of", "SIZE_BUCKETS",
    "wilson_lower", "earn_of", "earn_rows",
]
