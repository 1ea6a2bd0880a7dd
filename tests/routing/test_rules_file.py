"""The rules file read (routing/rules_file.py): every mistake one line with file and line, all of
them in file order, values normalised, load-time warnings for routes some clients cannot take, the
tool_loops key, and the shipped rules files loading cleanly."""

from __future__ import annotations

import textwrap

import pytest
import yaml

from tokunseba.routing import accepts_lines, check_file, decide, load_rules, load_rules_text, policy_lines, RulesError
from tokunseba.routing.endpoints import BUILTIN_ENDPOINTS, Endpoint
from tokunseba.routing.facts import PREDICATES as CHECKS
from tokunseba.routing.rules_file import ENDPOINT_KEYS, ROUTE_KEYS, TOP_KEYS

from tests.support.rules import EXAMPLES, facts, gemini_unregistered, LOCAL, RULES_DIR


# ---------------------------------------------------------------------------------------------
# Load-time errors: every class of mistake, one line, exact file and line

ERRORS = [
    ("yaml-syntax", "routes:\n  - name: a\n    to: [local\n  - name: b\n", 4, "YAML syntax error"),
    ("yaml-tab", "endpoints:\n\tlocal: {}\n", 2, "YAML syntax error"),
    ("yaml-two-documents", "routes: []\n---\nroutes: []\n", 2, "YAML syntax error"),
    ("top-not-mapping", "- a\n- b\n", 1, "the rules file must be a mapping, got a list"),
    ("top-unknown-key", "endpoints: {}\nrouts: []\n", 2, "unknown key 'routs' (expected one of: endpoints, routes, unmatched, tool_loops, prices, budgets, on_ledger_unavailable)"),
    ("endpoints-not-mapping", "endpoints:\n  - local\n", 2, "endpoints must be a mapping, got a list"),
    ("endpoint-not-mapping", "endpoints:\n  local: http://x/v1\n", 2, "endpoint 'local' must be a mapping"),
    ("endpoint-unknown-key", LOCAL + "    urll: x\n", 5, "endpoint 'local': unknown key 'urll'"),
    ("endpoint-unknown-protocol", LOCAL.replace("protocol: openai", "protocol: opneai"), 3,
     "protocol must be one of: anthropic, openai, openai-responses, gemini; got 'opneai'"),
    ("endpoint-no-protocol", "endpoints:\n  local:\n    url: http://a/v1\n", 3, "endpoint 'local' has no 'protocol'"),
    ("endpoint-no-url", "endpoints:\n  local:\n    protocol: openai\n", 3, "endpoint 'local' has no 'url'"),
    ("endpoint-url-scheme", LOCAL.replace("http://127", "ftp://127"), 4, "url must start with http:// or https://"),
    ("endpoint-url-not-string", LOCAL.replace("url: http://127.0.0.1:8000/v1", "url: [a]"), 4,
     "url must be a string, got a list"),
    ("endpoint-max-tokens-type", LOCAL + "    max_tokens: 4k\n", 5, "max_tokens must be an integer, got '4k'"),
    ("endpoint-max-tokens-zero", LOCAL + "    max_tokens: 0\n", 5, "max_tokens must be a positive integer"),
    ("endpoint-system-role", LOCAL + "    system_role: user\n", 5, "system_role must be one of: system, developer"),
    ("endpoint-max-tokens-field", LOCAL + "    max_tokens_field: max_output\n", 5, "max_tokens_field must be one of"),
    ("endpoint-key-in-key-env", LOCAL + "    key_env: sk-ant-api03-abcdef\n", 5, "NAME of an environment variable"),
    ("endpoint-shadows-builtin", "endpoints:\n  local: {protocol: openai, url: http://a/v1}\n  openai:\n"
     "    protocol: openai\n    url: http://b/v1\n", 3, "endpoint 'openai' shadows the built-in endpoint"),
    ("duplicate-key", LOCAL + "    protocol: anthropic\n", 5, "duplicate key 'protocol' (first at line 3)"),
    ("routes-not-list", "routes:\n  a: 1\n", 2, "routes must be a list, got a mapping"),
    ("route-not-mapping", "routes:\n  - just-a-name\n", 2, "route #1 must be a mapping"),
    ("route-unknown-key", LOCAL + "routes:\n  - name: r\n    to: local\n    too: local\n", 8, "route 'r': unknown key 'too'"),
    ("route-no-to", LOCAL + "routes:\n  - name: r\n    when: {tools: false}\n", 6, "route 'r' has no 'to'"),
    ("route-no-name", LOCAL + "routes:\n  - name: r\n    to: local\n  - to: local\n", 8, "route #2 has no 'name'"),
    ("route-unknown-endpoint", LOCAL + "routes:\n  - name: r\n    to: locall\n", 7,
     "route 'r': unknown endpoint 'locall' in 'to' (known: anthropic, gemini, local, openai)"),
    ("route-duplicate-name", LOCAL + "routes:\n  - name: r\n    to: local\n  - name: r\n    to: openai\n", 8,
     "duplicate route name 'r' (first at line 6)"),
    ("route-on-refused", LOCAL + "routes:\n  - name: r\n    to: local\n    on_refused: fail\n", 8,
     "on_refused must be one of: skip, error; got 'fail'"),
    ("route-model-type", LOCAL + "routes:\n  - name: r\n    to: local\n    model: {a: 1}\n", 8,
     "route 'r': model must be a string, got a mapping"),
    ("when-not-mapping", LOCAL + "routes:\n  - name: r\n    when: [tools]\n    to: local\n", 7,
     "route 'r': when must be a mapping, got a list"),
    ("when-unknown-key", LOCAL + "routes:\n  - name: r\n    when:\n      tools: false\n      tool: false\n    to: local\n",
     9, "route 'r': when: unknown key 'tool'"),
    ("when-duplicate-key", LOCAL + "routes:\n  - name: r\n    when:\n      tools: false\n      tools: true\n    to: local\n",
     9, "duplicate key 'tools' (first at line 8)"),
    ("when-client-protocol", LOCAL + "routes:\n  - name: r\n    when:\n      client: [anthropic, claude]\n    to: local\n",
     8, "when.client: unknown protocol 'claude'"),
    ("when-model-type", LOCAL + "routes:\n  - name: r\n    when:\n      model:\n        - '*haiku*'\n        - {x: 1}\n"
     "    to: local\n", 10, "when.model must be a string, got a mapping"),
    ("when-tools-not-bool", LOCAL + "routes:\n  - name: r\n    when:\n      tools: 0\n    to: local\n", 8,
     "route 'r': when.tools must be true or false, got '0'"),
    ("when-thinking-not-bool", LOCAL + "routes:\n  - name: r\n    when:\n      thinking: maybe\n    to: local\n", 8,
     "when.thinking must be true or false, got 'maybe'"),
    ("when-images-empty", LOCAL + "routes:\n  - name: r\n    when:\n      images:\n    to: local\n", 8,
     "when.images must be true or false, got nothing"),
    ("when-bytes-not-int", LOCAL + "routes:\n  - name: r\n    when:\n      max_request_bytes: 20k\n    to: local\n", 8,
     "route 'r': when.max_request_bytes must be an integer, got '20k'"),
    ("when-bytes-negative", LOCAL + "routes:\n  - name: r\n    when:\n      max_request_bytes: -1\n    to: local\n", 8,
     "when.max_request_bytes must not be negative"),
    ("when-bad-regex", LOCAL + "routes:\n  - name: r\n    when:\n      last_user_matches: '(?i)summar('\n    to: local\n",
     8, "when.last_user_matches: bad regex '(?i)summar(': missing ), unterminated subpattern"),
    ("when-header-not-mapping", LOCAL + "routes:\n  - name: r\n    when:\n      header: x-app\n    to: local\n", 8,
     "when.header must be a mapping"),
    ("when-header-twice", LOCAL + "routes:\n  - name: r\n    when:\n      header:\n        x-app: cli\n        X-App: sdk\n"
     "    to: local\n", 10, "header 'X-App' given twice"),
]


@pytest.mark.parametrize("text,line,fragment", [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_every_mistake_is_one_line_with_file_and_line(tmp_path, text, line, fragment):
    path = tmp_path / "rules.yaml"
    path.write_text(text)
    with pytest.raises(RulesError) as ei:
        load_rules(path)
    msg = str(ei.value)
    assert "\n" not in msg
    assert msg.startswith(f"{path}:{line}:"), msg
    assert fragment in msg, msg
    assert "sk-ant" not in msg  # a key written into the file is never echoed
    ok, lines = check_file(path)
    assert not ok and lines[0] == msg


def test_all_problems_are_reported_in_file_order():
    text = textwrap.dedent("""\
        endpoints:
          local:
            protocol: nope
            url: ftp://x
        routes:
          - name: r
            when: {tools: 1}
            to: missing
          - name: r
            to: local
        """)
    with pytest.raises(RulesError) as ei:
        load_rules_text(text, "f.yaml")
    assert ei.value.errors == [
        "f.yaml:3: endpoint 'local': protocol must be one of: anthropic, openai, openai-responses, gemini; got 'nope'",
        "f.yaml:4: endpoint 'local': url must start with http:// or https://, got 'ftp://x'",
        "f.yaml:7: route 'r': when.tools must be true or false, got '1'",
        "f.yaml:8: route 'r': unknown endpoint 'missing' in 'to' (known: anthropic, gemini, local, openai)",
        "f.yaml:9: duplicate route name 'r' (first at line 6)",
    ]
    assert str(ei.value) == ei.value.errors[0]


def test_missing_file_and_no_file(tmp_path):
    with pytest.raises(RulesError, match=r"nope\.yaml: no such rules file"):
        load_rules(tmp_path / "nope.yaml")
    rules = load_rules(None)
    assert rules.routes == [] and rules.endpoints == BUILTIN_ENDPOINTS
    assert decide(rules, facts()).action == "pass"


@pytest.mark.parametrize("text", ["", "# only comments\n", "routes:\n", "endpoints:\nroutes: []\n", "~\n"])
def test_empty_rules_route_nothing(text):
    rules = load_rules_text(text, "e.yaml")
    assert rules.routes == [] and set(rules.endpoints) == set(BUILTIN_ENDPOINTS) and rules.warnings == []


def test_values_are_normalised():
    rules = load_rules_text(LOCAL + textwrap.dedent("""\
        routes:
          - name: r
            when:
              client: anthropic
              model: "*haiku*"
              header: {X-App: cli}
              max_request_bytes: 0x4E20
            to: local
            model:
        """), "n.yaml")
    (route,) = rules.routes
    assert route.when == {"client": ["anthropic"], "model": ["*haiku*"], "header": {"x-app": "cli"},
                          "max_request_bytes": 20000}
    assert (route.model, route.on_refused, route.line, route.to) == (None, "skip", 6, "local")
    assert rules.endpoints["local"] == Endpoint("local", "openai", "http://127.0.0.1:8000/v1")


def test_warnings_for_untranslatable_pairs(tmp_path, gemini_unregistered):
    path = tmp_path / "w.yaml"
    path.write_text(textwrap.dedent("""\
        endpoints:
          local: {protocol: openai, url: http://127.0.0.1:8000/v1, count_tokens: none}
          gem: {protocol: gemini, url: http://127.0.0.1:9000/v1beta}
        routes:
          - name: fine
            when: {client: [anthropic, openai]}
            to: local
          - name: anyone
            to: local
          - name: to-gemini
            when: {client: anthropic}
            to: gem
            on_refused: error
        """))
    rules = load_rules(path)
    assert rules.warnings == [
        f"{path}:8: warning: route 'anyone' → local (openai): "
        "no translator from gemini to openai; such turns are refused here and go on to the next route",
        f"{path}:10: warning: route 'to-gemini' → gem (gemini): no translator from anthropic to gemini; "
        "such turns are refused here and answered with an error",
    ]
    assert check_file(path) == (True, ["OK: 2 endpoints declared (+3 built in), 3 routes", *policy_lines(rules),
                                       *accepts_lines(rules), *rules.warnings])


def test_tool_loops_key(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text(LOCAL + "tool_loops: route\nroutes: []\n")
    assert load_rules(path).tool_loops == "route"
    path.write_text(LOCAL + "tool_loops: sometimes\nroutes: []\n")
    with pytest.raises(RulesError) as ei:
        load_rules(path)
    assert "tool_loops must be one of: follow, route; got 'sometimes'" in str(ei.value)


# ---------------------------------------------------------------------------------------------
# Shipped rules files


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_examples_load_cleanly(path):
    ok, lines = check_file(path)
    assert ok, lines
    assert not [line for line in lines if "warning:" in line], "examples should load without warnings"
    rules = load_rules(path)
    assert rules.routes
    assert all(not rules.endpoints[r.to].builtin for r in rules.routes)


def test_required_examples_exist():
    assert {"easy-turns-local.yaml", "all-local.yaml", "retarget-anthropic.yaml"} <= {p.name for p in EXAMPLES}


def test_default_is_safe_and_its_commented_example_is_valid():
    path = RULES_DIR / "default.yaml"
    rules = load_rules(path)
    assert rules.routes == [] and rules.warnings == [] and rules.unmatched == "pass"
    # the commented example documents every key and is itself a valid rules file
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("# endpoints:"))
    text = "\n".join(line[2:] for line in lines[start:] if line.startswith("#"))
    example = load_rules_text(text, "doc")
    route, earned = example.routes  # the second: a route with earn: (it takes no shadow:)
    assert route.when.keys() == CHECKS.keys() and earned.earn is not None
    raw = yaml.safe_load(text)
    assert raw["endpoints"]["local"].keys() == ENDPOINT_KEYS.keys()
    assert set(raw["routes"][0]) | set(raw["routes"][1]) == set(ROUTE_KEYS)
    assert set(raw) == set(TOP_KEYS)
