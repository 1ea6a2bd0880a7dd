"""Headless Chromium (Debian's `chromium`) driven over the DevTools protocol, for tests that
check what a user sees in a page.

A small synchronous client on one websocket (the `websockets` package): start the browser on
a free DevTools port in a fresh profile, open one page, navigate, evaluate JavaScript, click,
take screenshots. No browser download: the test skips when chromium is absent, and fails
under CI=true (scripts/ci-extras.sh installs it)."""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from websockets.sync.client import connect

CHROMIUM_NAMES = ("chromium", "chromium-browser")


def need_chromium() -> str:
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    if os.environ.get("CI"):
        pytest.fail("chromium is not installed: .ci/run must run scripts/ci-extras.sh")
    pytest.skip("chromium not installed (scripts/ci-extras.sh installs Debian's chromium)")


class Browser:
    """One headless Chromium process and one page in it."""

    def __init__(self, profile: Path, width: int = 1400, height: int = 900, timeout: float = 30.0) -> None:
        self.timeout = timeout
        self.ids = itertools.count(1)
        self.proc = subprocess.Popen(
            [need_chromium(), "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
             "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", f"--user-data-dir={profile}",
             f"--window-size={width},{height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.stack = contextlib.ExitStack()
        self.ws = self.stack.enter_context(connect(self._devtools_url(), max_size=64 * 1024 * 1024,
                                                   open_timeout=timeout, proxy=None))
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Page.enable", session=True)
        self.call("Runtime.enable", session=True)
        self.call("Emulation.setDeviceMetricsOverride", session=True, width=width, height=height,
                  deviceScaleFactor=1, mobile=False)

    def _devtools_url(self) -> str:
        deadline = time.monotonic() + self.timeout
        seen: list[str] = []
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                if self.proc.poll() is not None:
                    break
                continue
            seen.append(line)
            if m := re.search(r"DevTools listening on (ws://\S+)", line):
                return m.group(1)
        raise RuntimeError("chromium did not start:\n" + "".join(seen))

    def call(self, method: str, *, session: bool = False, **params) -> dict:
        msg_id = next(self.ids)
        msg = {"id": msg_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = self.session
        self.ws.send(json.dumps(msg))
        deadline = time.monotonic() + self.timeout
        while True:
            reply = json.loads(self.ws.recv(timeout=max(deadline - time.monotonic(), 0.01)))
            if reply.get("id") == msg_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def navigate(self, url: str) -> None:
        self.call("Page.navigate", session=True, url=url)

    def js(self, expression: str):
        """The JSON value of a JavaScript expression in the page (awaits promises)."""
        r = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"JavaScript failed: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait_for(self, expression: str, what: str, timeout: float | None = None):
        """Evaluate until truthy; fail the test with ``what`` after the timeout."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            got = self.js(expression)
            if got:
                return got
            if time.monotonic() > deadline:
                seen = self.js("document.title + ' | ' + (document.body ? document.body.innerText : '')") or ""
                pytest.fail(f"timed out waiting for {what} in the browser; the page shows:\n{seen[:3000]}")
            time.sleep(0.1)

    def screenshot(self, *paths: Path) -> bytes:
        png = base64.b64decode(self.call("Page.captureScreenshot", session=True, format="png")["data"])
        for p in paths:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(png)
        return png

    def close(self) -> None:
        try:
            self.stack.close()
        finally:
            if self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
