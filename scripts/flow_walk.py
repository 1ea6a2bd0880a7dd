#!/usr/bin/env python3
"""Where one request's ``flow`` walks through the request hook: files entered, and returns to
a file already left (issue 28's measure of the front door).

Drives the real addon through mitmproxy's test context (as scripts/bench/bench_hooks.py does: a
real ledger, a loopback TCP server standing in for the endpoint), warms it up with two whole
turns (the endpoint's connection back in the relay's pool, as between real turns),
then follows one more turn's ``request`` hook with ``sys.setprofile``. The walk is the
sequence of tokunseba files control is in, call after call and return after return, as the
adapter (addon/tokunseba/proxy/) sees it: the hook's file, any adapter file, and a file of a
function adapter code called (what that function calls further is its own business and is
not followed: while it runs, the walk stays in its file). Each change of file enters one; a
file entered again after it was left is a return to a file already left — the adapter
calling piece by piece into the same module, and coming back to itself after each piece. It
prints, per tree and turn kind (pass-through, retarget, translated):

  files    distinct files entered
  entries  entries in all (the first file included)
  returns  entries into a file already left (entries - files)

with the files most returned to. ``--against OTHER_ROOT`` walks another checkout's addon/
in its own process too (a tree from before the packages has addon/tokunseba/mitm.py), so the
two read side by side. Not a test: it prints, it asserts nothing.
Usage: .venv/bin/python scripts/flow_walk.py [--against OTHER_ROOT [--against-label LABEL]]
                                             [--kind translated|retarget|pass-through] [--show]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_hooks import ANTHROPIC_REPLY, CHAT_REPLY, KINDS, RULES  # noqa: E402  (the same rules and turns as the hook benchmark)


def child(tree: Path) -> None:
    """Walk one request of each kind through ``tree``'s request hook; print one JSON line."""
    addon_dir = (tree / "addon").resolve()
    sys.path.insert(0, str(addon_dir))
    import asyncio
    import os
    import tempfile

    from mitmproxy import http
    from mitmproxy.addons.proxyserver import Proxyserver
    from mitmproxy.test import taddons, tflow, tutils

    try:
        from tokunseba.proxy.mitm import Tokunseba
    except ModuleNotFoundError:  # a tree from before the packages (issue 23)
        from tokunseba.mitm import Tokunseba  # type: ignore[no-redef]

    pkg = str(addon_dir / "tokunseba") + os.sep
    adapter = str(addon_dir / "tokunseba" / "proxy") + os.sep
    if not os.path.isdir(adapter):  # before the packages: the adapter was tokunseba/mitm.py
        adapter = str(addon_dir / "tokunseba" / "mitm.py")

    def flow(model: str) -> http.HTTPFlow:
        body = json.dumps({"model": model, "max_tokens": 50, "metadata": {"user_id": "u-1"},
                           "messages": [{"role": "user", "content": "Summarise: hello"}]}).encode()
        headers = http.Headers([(k.encode(), v.encode()) for k, v in (
            ("host", "api.anthropic.com"), ("x-api-key", "sk-ant-walk-0001"), ("anthropic-version", "2023-06-01"),
            ("content-type", "application/json"), ("content-length", str(len(body))),
            ("user-agent", "Anthropic/Python 0.40.0"))])
        req = tutils.treq(scheme=b"https", host="api.anthropic.com", port=443, method=b"POST", path=b"/v1/messages",
                          headers=headers, content=body)
        return tflow.tflow(req=req)

    async def main() -> None:
        os.environ["TK_BENCH_EP_KEY"] = "sk-walk-endpoint-0002"
        held = []
        server = await asyncio.start_server(lambda r, w: held.append(w), "127.0.0.1", 0)
        work = Path(tempfile.mkdtemp(prefix="flow_walk_"))
        (work / "rules.yaml").write_text(RULES.format(port=server.sockets[0].getsockname()[1]))
        addon = Tokunseba()
        out = {}
        with taddons.context(Proxyserver(), addon) as tctx:
            tctx.configure(addon, tokunseba_rules=str(work / "rules.yaml"), tokunseba_ledger=str(work / "ledger.db"))
            await addon.running()
            if getattr(addon, "reach", None) is not None:
                addon.reach.answered("api.anthropic.com", 443)  # the healthy path (as bench_hooks.py)
            for kind, model in KINDS.items():
                for _ in range(2):  # warm, a whole turn each: imports and caches are not the walk, and the
                    w = flow(model)  # endpoint's connection is back in the relay's pool, as between real turns
                    await addon.request(w)
                    await asyncio.sleep(0)
                    w.response = tutils.tresp(status_code=200, content=None,
                                              headers=http.Headers(content_type="application/json"))
                    addon.responseheaders(w)
                    w.response.content = json.dumps(CHAT_REPLY if kind == "translated" else ANTHROPIC_REPLY).encode()
                    addon.response(w)
                    w.live = False
                    for _ in range(3):
                        await asyncio.sleep(0)
                f = flow(model)
                walk: list[str] = []
                stack: list[tuple[str, bool]] = []  # (file, the walk is in it) per tokunseba frame

                def profile(frame, event, arg):
                    name = frame.f_code.co_filename
                    if event not in ("call", "return") or not name.startswith(pkg):
                        return
                    if event == "call":
                        if not stack and frame.f_code.co_name != "request":
                            return
                        # in the walk: the hook, adapter code, and what adapter code calls
                        stack.append((name, not stack or name.startswith(adapter) or stack[-1][0].startswith(adapter)))
                    elif stack:
                        stack.pop()
                    here = next((f for f, shown in reversed(stack) if shown), None)
                    if here is not None and (not walk or walk[-1] != here):
                        walk.append(here)

                sys.setprofile(profile)
                try:
                    await addon.request(f)
                finally:
                    sys.setprofile(None)
                await asyncio.sleep(0)
                out[kind] = [e[len(pkg):] for e in walk]
            addon.done()
        server.close()
        print(json.dumps(out), flush=True)

    asyncio.run(main())


def summary(entries: list[str]) -> tuple[int, int, int, dict[str, int]]:
    seen: set[str] = set()
    back: dict[str, int] = {}
    for e in entries:
        if e in seen:
            back[e] = back.get(e, 0) + 1
        seen.add(e)
    return len(seen), len(entries), sum(back.values()), back


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="Everything it starts listens on 127.0.0.1 and is stopped at the end.")
    ap.add_argument("--against", type=Path, help="another checkout's root (its addon/ is walked too)")
    ap.add_argument("--against-label", default="other", help="its name in the table (default: other)")
    ap.add_argument("--kind", choices=sorted(KINDS), help="only this turn (default: all three)")
    ap.add_argument("--show", action="store_true", help="also print each walk, file by file")
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        child(args.child)
        return 0
    trees = {"this": ROOT}
    if args.against is not None:
        if not any((args.against / "addon" / "tokunseba" / p).is_file() for p in ("proxy/mitm.py", "mitm.py")):
            ap.error(f"--against {args.against}: no addon/tokunseba/proxy/mitm.py (or mitm.py) there")
        trees[args.against_label] = args.against.resolve()
    results = {}
    for name, path in trees.items():
        done = subprocess.run([sys.executable, __file__, "--child", str(path)], capture_output=True, text=True,
                              timeout=300)
        if done.returncode != 0:
            print(f"{name}: the walk failed:\n{done.stderr[-2000:]}", file=sys.stderr)
            return 1
        results[name] = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"{'tree':<10} {'turn':<13} {'files':>5} {'entries':>7} {'returns':>7}  most returned to")
    for kind in ([args.kind] if args.kind else list(KINDS)):
        for name in trees:
            files, entries, returns, back = summary(results[name][kind])
            top = ", ".join(f"{f} {n}" for f, n in sorted(back.items(), key=lambda x: -x[1])[:4])
            print(f"{name:<10} {kind:<13} {files:>5} {entries:>7} {returns:>7}  {top}")
            if args.show:
                print("    " + " > ".join(results[name][kind]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
