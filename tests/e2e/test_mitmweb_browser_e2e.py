"""What a user sees in mitmweb (issue 14), checked in a real browser: `tokunseba run --web`
as a user starts it, a scripted OpenAI-shaped upstream, turns from the official anthropic
SDK (translated, refused, cut mid-stream, context overflow) plus one non-provider request;
then headless Chromium (Debian's) opens the URL that `run` printed, with its token, and
reads the flow list: path, status, mark and comment filled, the client's URL on translated
turns, the error mark on failed ones; the documented filters; the tokunseba-original view
rendering the client's request as indented JSON. A screenshot of the list is kept as a test
artifact (the pytest tmp dir and tests/artifacts/, git-ignored)."""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import anthropic
import httpx
import pytest
from mitmproxy.utils.emoji import emoji

from tokunseba.webview.view import MARKS

from tests.support.browser import Browser, need_chromium
from .test_mitmweb_e2e import Mitmweb, chat_stream, poll
from tests.support.upstream import Reply

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
TOKUNSEBA = Path(sys.executable).parent / "tokunseba"
ARTIFACTS = ROOT / "tests" / "artifacts"
CLIENT_KEY = "sk-ant-client-secret-BROWSER-DO-NOT-LEAK"
EP_KEY = "sk-endpoint-browser-0001"
TIMEOUT = 60.0

RULES = """\
endpoints:
  local:
    protocol: openai
    url: {oai}/v1
    key_env: TK_BROWSER_EP_KEY
  gem:
    protocol: gemini
    url: {oai}/v1beta
routes:
  - name: strict-gemini
    when: {{client: anthropic, model: "strict-*"}}
    to: gem
    on_refused: error
  - name: easy-turns
    when: {{client: anthropic, model: "claude-*"}}
    to: local
    on_failure: error  # the context overflow is the endpoint's answer, not a reason to try the provider
"""
ICON = {k: emoji[v] for k, v in MARKS.items()}


class WebRun(Mitmweb):
    """`tokunseba run --web` as a user starts it: the proxy port mitmweb prints, and the UI URL
    (with its token) that tokunseba prints."""

    what = "tokunseba run --web"

    def command(self, rules: Path) -> list[str]:
        return [str(TOKUNSEBA), "run", "--web", "--port", "0", "--web-port", str(self.web_port), "--rules", str(rules),
                "--ledger", str(self.ledger), "--confdir", str(self.confdir)]

    def read_startup_line(self, line: str) -> None:
        if m := re.search(r"HTTP\(S\) proxy listening at .*:(\d+)", line):
            self.port = int(m.group(1))
        if m := re.search(r"mitmweb UI .*:  (http://127\.0\.0\.1:(\d+)/\?token=(\w+))$", line.rstrip()):
            assert int(m.group(2)) == self.web_port
            self.ui_url, self.token = m.group(1), m.group(3)
        self.serving = self.serving or "Web server listening" in line

    def ready(self) -> bool:
        return self.port is not None and self.token is not None and self.serving

    def _wait_ready(self) -> bool:
        self.ui_url, self.serving = None, False
        return super()._wait_ready()


@pytest.fixture(scope="module")
def web(tmp_path_factory):
    need_chromium()
    with WebRun.serving(tmp_path_factory.mktemp("webrun"), RULES, {"TK_BROWSER_EP_KEY": EP_KEY}) as w:
        yield w


ASK = {"max_tokens": 300, "thinking": {"type": "adaptive"},
       "messages": [{"role": "user", "content": "Say hello, été."}]}


@pytest.fixture(scope="module")
def turns(web):
    """Four provider turns and one non-provider request, then every flow as mitmweb has it."""
    oai = web.upstream
    oai.script(Reply.sse(chat_stream("chatcmpl-ok", ("Hel", "lo")), delay=0.01),
               Reply.sse(chat_stream("chatcmpl-cut", ("Hel", "lo", " there")), die_after=2),
               Reply.json({"error": {"message": "This model's maximum context length is 8192 tokens.",
                                     "type": "invalid_request_error", "param": "messages",
                                     "code": "context_length_exceeded"}}, 400),
               Reply.json({"settings": {}}),
               Reply.sse(chat_stream("chatcmpl-replay", ("Once ", "more")), delay=0.01))  # for Replay
    got: dict = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HTTPS_PROXY", web.url)
        mp.setenv("SSL_CERT_FILE", str(web.confdir / "mitmproxy-ca-cert.pem"))
        for k in ("HTTP_PROXY", "NO_PROXY", "no_proxy", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
            mp.delenv(k, raising=False)
        client = anthropic.Anthropic(api_key=CLIENT_KEY, max_retries=0, timeout=TIMEOUT)
        with client.messages.stream(model="claude-ok-1", **ASK) as s:
            got["ok"] = s.get_final_message()
        with pytest.raises(anthropic.BadRequestError) as refused:
            # a tool name Anthropic allows and Gemini rejects: the Gemini route refuses the turn
            client.messages.create(model="strict-1", **ASK, tools=[{"name": "7zip", "input_schema": {"type": "object"}}])
        got["refused"] = refused.value.message
        with pytest.raises(anthropic.APIError) as cut:
            with client.messages.stream(model="claude-cut-1", **ASK) as s:
                s.get_final_message()
        got["cut"] = str(cut.value)
        with pytest.raises(anthropic.BadRequestError) as overflow:
            client.messages.create(model="claude-long-1", **ASK)
        got["overflow"] = overflow.value.message
        client.close()
    with httpx.Client(proxy=web.url, trust_env=False, timeout=TIMEOUT) as c:
        assert c.get(f"{oai.url}/api/settings").status_code == 200

    def all_done():
        flows = web.flows()
        done = [f for f in flows if f.get("response") or f.get("error")]
        return flows if len(flows) == 5 and len(done) == 5 else None

    flows = poll(all_done, "five finished flows in mitmweb", timeout=TIMEOUT)
    return got, flows


@pytest.fixture(scope="module")
def browser(web, tmp_path_factory):
    b = Browser(tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield b
    finally:
        b.close()


ROWS_JS = """Array.from(document.querySelectorAll('tbody tr')).filter(tr => tr.querySelector('td.col-path')).map(tr => ({
  path: Array.from(tr.querySelector('td.col-path').childNodes).filter(n => n.nodeType === 3)
        .map(n => n.textContent).join('').trim(),
  marker: ((tr.querySelector('td.col-path .marker') || {}).innerText || '').trim(),
  method: (tr.querySelector('td.col-method') || {}).innerText || '',
  status: ((tr.querySelector('td.col-status') || {}).innerText || '').trim(),
  comment: ((tr.querySelector('td.col-comment') || {}).innerText || '').trim(),
}))"""


def rows(browser: Browser, search: str | None = None, expect: int | None = None) -> list[dict]:
    """The flow list as the page shows it, after typing a filter into the Search box if given."""
    if search is not None:
        browser.js("""Array.from(document.querySelectorAll('a')).find(a => a.innerText.trim() === 'Flow List').click();
                      true""")  # the Search box is on the Flow List tab (selecting a flow opens the Flow tab)
        browser.wait_for("""document.querySelector('input[placeholder="Search"]') !== null""", "the Search box")
        browser.js("""(() => { const i = document.querySelector('input[placeholder="Search"]');
            Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, 'value').set.call(i, %s);
            i.dispatchEvent(new Event('input', {bubbles: true})); return true; })()""" % json.dumps(search))
    if expect is not None:
        browser.wait_for(f"({ROWS_JS}).length === {expect}", f"{expect} rows for {search!r}")
        time.sleep(0.3)  # no late change
    return browser.js(ROWS_JS)


def choose_view(browser: Browser, name: str) -> str:
    """Open the content view menu under the selected flow's Request tab, pick ``name``; the
    text the page then renders."""
    browser.js("""Array.from(document.querySelectorAll('.contentview .controls a'))
                  .find(a => a.innerText.includes('View:')).click(); true""")
    browser.wait_for("""Array.from(document.querySelectorAll('.dropdown-menu a'))
                        .some(a => a.innerText.trim() === %s)""" % json.dumps(name), f"{name} in the view menu")
    browser.js("""Array.from(document.querySelectorAll('.dropdown-menu a'))
                  .find(a => a.innerText.trim() === %s).click(); true""" % json.dumps(name))
    browser.wait_for("document.querySelector('.contentview .controls').innerText.includes(%s)" % json.dumps(name),
                     f"the {name} view chosen")
    return browser.wait_for("""(() => { const pre = document.querySelector('.contentview pre');
        const text = pre ? Array.from(pre.children).map(line => line.textContent.replace(/^\\u00a0$/, '')).join('\\n') : '';
        return text.startsWith('POST') ? text : null; })()""", f"the {name} text")


@pytest.fixture(scope="module")
def page(web, turns, browser, tmp_path_factory):
    """The flow list, loaded from the URL `tokunseba run` printed; screenshot kept."""
    browser.navigate(web.ui_url)
    # the page first draws mitmweb's default columns, then the ones web_columns asked for
    browser.wait_for("document.querySelector('thead th.col-comment') !== null", "the Comment column")
    browser.wait_for(f"({ROWS_JS}).filter(r => r.status).length === 5", "five flows with a status")
    listed = browser.js(ROWS_JS)
    shot = tmp_path_factory.mktemp("artifacts") / "mitmweb-flow-list.png"
    browser.screenshot(shot, ARTIFACTS / "mitmweb-flow-list.png")
    return listed, shot


def by_comment(listed: list[dict], needle: str) -> dict:
    (row,) = [r for r in listed if needle in r["comment"]]
    return row


def test_the_turns_behaved_as_scripted(turns):
    got, _ = turns
    assert got["ok"].content[-1].text == "Hello"
    assert "Gemini rejects the function name" in got["refused"]
    assert "prompt is too long" in got["overflow"]


def test_list_shows_path_status_mark_and_comment(page, web):
    listed, shot = page
    assert shot.stat().st_size > 10_000 and (ARTIFACTS / "mitmweb-flow-list.png").exists()
    assert len(listed) == 5 and all(r["path"] and r["status"] and r["method"] for r in listed)
    provider = [r for r in listed if "api.anthropic.com/v1/messages" in r["path"]]
    assert len(provider) == 4 and all(r["marker"] and r["comment"] for r in provider)
    assert not any("__tokunseba_relay" in r["path"] or "127.0.0.1" in r["path"] for r in provider)
    other = [r for r in listed if "/api/settings" in r["path"]]
    assert len(other) == 1 and other[0]["marker"] == "" and other[0]["comment"] == ""


def test_translated_turn_shows_the_clients_url_and_the_endpoint(page, web):
    (row,) = [r for r in page[0] if r["marker"] == ICON["translated"]]
    assert row["path"].startswith("https://api.anthropic.com/v1/messages") and row["status"] == "200"
    # the short reason first, then the request id and the details
    assert re.match(r"🔁 translated 200 · tk-[0-9a-f]{24} · easy-turns → local · anthropic→openai · dropped: thinking",
                    row["comment"])
    assert "added: stream_options.include_usage" in row["comment"]
    assert f"sent to {web.upstream.url}/v1/chat/completions" in row["comment"]


def test_failed_turns_carry_the_error_mark(page):
    listed = page[0]
    cut = by_comment(listed, "error mid-stream")
    assert cut["marker"] == ICON["error"] and cut["status"] == "200"
    overflow = by_comment(listed, "prompt is too long")
    assert overflow["marker"] == ICON["error"] and overflow["status"] == "400"
    assert "maximum context length is 8192" in overflow["comment"]
    refused = by_comment(listed, "refused:")
    assert refused["marker"] == ICON["refused"] and refused["status"] == "400"
    for r in listed:
        assert CLIENT_KEY not in r["comment"] and EP_KEY not in r["comment"]


@pytest.mark.parametrize("search,expect", [
    ("~marker :repeat:", 1),  # translated and ended well
    ("~marker :x:", 2),  # failed turns
    ("~comment dropped", 3),  # turns that left fields behind
    ("~comment tk-", 4),  # every turn's comment names its request id, after the short reason
    ("~h x-tokunseba-request-id", 4),  # every turn tokunseba planned (the reply header)
    ("~d api.anthropic.com", 4),  # translated turns too: the flow keeps the client's URL
])
def test_documented_filters_work_in_the_page(page, browser, search, expect):
    shown = rows(browser, search, expect)
    assert len(shown) == expect
    rows(browser, "", 5)


def test_original_view_renders_the_clients_request_as_json(page, web, turns, browser):
    rows(browser, "", 5)
    browser.js("""Array.from(document.querySelectorAll('tbody tr td.col-path'))
                  .find(td => td.innerText.includes(%s)).click(); true""" % json.dumps(ICON["translated"]))
    browser.wait_for("document.querySelector('.flow-detail .contentview') !== null", "the flow's Request tab")
    text = choose_view(browser, "tokunseba-original")
    browser.screenshot(ARTIFACTS / "mitmweb-original-view.png")
    head, body = text.split("\n\n", 1)
    assert head.splitlines()[0] == "POST https://api.anthropic.com/v1/messages"
    assert head.splitlines()[1] == f"# sent to {web.upstream.url}/v1/chat/completions (local, openai)"
    assert re.search(r"^(x-api-key: |authorization: Bearer )<redacted>$", head, re.M | re.I)  # the client's key
    assert CLIENT_KEY not in text and EP_KEY not in text
    sent = json.loads(body)
    assert sent["model"] == "claude-ok-1" and sent["thinking"] == ASK["thinking"]
    assert '\n  "thinking": {' in body  # indented: the dropped field is on its own line




def test_replay_from_the_page_translates_the_turn_again(page, web, browser):
    """The user selects the translated flow and presses Replay: the client's turn goes through
    the rules and the translator again and the flow shows the new, good reply."""
    rows(browser, "", 5)
    browser.js("""Array.from(document.querySelectorAll('tbody tr td.col-path'))
                  .find(td => td.innerText.includes(%s)).click(); true""" % json.dumps(ICON["translated"]))
    browser.wait_for("document.querySelector('.flow-detail') !== null", "the flow's detail pane")
    browser.js("""Array.from(document.querySelectorAll('nav a, .nav-tabs a, header a'))
                  .find(a => a.innerText.trim() === 'Flow').click(); true""")
    browser.wait_for("""Array.from(document.querySelectorAll('button, a'))
                        .some(b => b.innerText.trim() === 'Replay')""", "the Replay button")
    browser.js("""Array.from(document.querySelectorAll('button, a'))
                  .find(b => b.innerText.trim() === 'Replay').click(); true""")
    replayed = poll(lambda: next((f for f in web.flows() if f.get("is_replay") == "request" and f.get("response")
                                  and f["response"].get("contentLength")), None), "the replayed flow's reply")
    assert replayed["response"]["status_code"] == 200 and replayed["marked"] == ICON["translated"]
    assert replayed["request"]["host"] == "api.anthropic.com" and replayed["request"]["path"] == "/v1/messages"
    body = web.api.get(f"/flows/{replayed['id']}/response/content.data").content
    assert b"message_stop" in body and b"Once " in body and b"more" in body and b"unknown relay token" not in body
    sent = web.upstream.requests[-1]
    assert sent.path == "/v1/chat/completions" and sent.headers["authorization"] == f"Bearer {EP_KEY}"
    assert json.loads(sent.body)["model"] == "claude-ok-1" and "x-api-key" not in sent.headers


def test_comment_column_is_wide_and_a_request_id_finds_its_turn(page, web, browser):
    """The comment starts with the request id, the column is wide enough to read it and the
    error or route after it (mitmweb's own is 150 px), and the id typed into Search finds
    that one turn. Measured on the list as it first opens (a selected flow's detail pane
    takes half the window)."""
    browser.navigate(web.ui_url)
    browser.wait_for("document.querySelector('tbody td.col-comment') !== null", "the Comment column")
    widths = browser.js("""(() => { const td = document.querySelector('tbody td.col-comment');
        const table = td.closest('table'); return [td.getBoundingClientRect().width, table.getBoundingClientRect().width]; })()""")
    assert widths[0] >= 0.35 * widths[1] and widths[0] > 300, widths
    rid = next(p for p in by_comment(page[0], "refused:")["comment"].split(" · ") if p.startswith("tk-"))
    assert re.fullmatch(r"tk-[0-9a-f]{24}", rid)
    (row,) = rows(browser, f"~comment {rid[:10]}", 1)
    assert "refused:" in row["comment"]
    rows(browser, "", 5)
