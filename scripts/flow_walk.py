#!/usr/bin/env python3
"""Where one request's ``flow`` walks through the request hook: files entered, and returns to
a file already left (issue 28's measure of the front door).

Drives the real addon through mitmproxy's test context (as scripts/bench_hooks.py does: a
real ledger, a loopback TCP server standing in for the endpoint), warms it up with one turn,
then follows one more turn's ``request`` hook with ``sys.setprofile``. The walk is the
sequence of tokunseba files that the adapter's code (addon/tokunseba/proxy/) calls into, in
order: every call made from a proxy/ frame to a Python function of another tokunseba file
*enters* that file (what that function calls further is its own business and is not
followed); the hook's own file starts the walk. A return to a file already left is an entry
into a file entered before — the adapter calling piece by piece into the same module. It
prints, per tree and turn kind (pass-through, retarget, translated):

  files    distinct files entered
  entries  entries in all
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
from bench_hooks import KINDS, RULES  # noqa: E402  (the same rules and turns as the hook benchmark)


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

    def walk_of(events: list[tuple[str, str]]) -> list[str]:
        return [callee for caller, callee in events]

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
                await addon.request(flow(model))  # warm: imports and caches are not the walk
                await asyncio.sleep(0)
                f = flow(model)
                hook_file = None
                entries: list[str] = []

                def profile(frame, event, arg):
                    nonlocal hook_file
                    if event != "call":
                        return
                    callee = frame.f_code.co_filename
                    if not callee.startswith(pkg):
                        return
                    if hook_file is None:
                        if frame.f_code.co_name == "request":
                            hook_file = callee
                            entries.append(callee)
                        return
                    caller = frame.f_back.f_code.co_filename if frame.f_back is not None else ""
                    if caller.startswith(adapter) and callee != caller:
                        entries.append(callee)

                sys.setprofile(profile)
                try:
                    await addon.request(f)
                finally:
                    sys.setprofile(None)
                await asyncio.sleep(0)
                out[kind] = [e[len(pkg):] for e in entries]
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
