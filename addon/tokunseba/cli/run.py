"""`tokunseba run`, `tokunseba env`, `tokunseba check`.

`run` starts mitmdump (mitmweb with --web) from this same environment with the addon; it
never imports mitmproxy itself. It listens two ways at once, in that one process: the HTTPS
proxy (``--mode regular``, on --port) and, unless --no-base-url, one plain-HTTP base-URL
listener per provider host (``--mode reverse:https://HOST@PORT``; the hosts are read from
protocols/, in the registry's order: Anthropic, OpenAI (Chat and Responses share it), Gemini)
on consecutive ports from --base-url-port (default --port + 2; 0, or --port 0, picks free
ones). Both bind --host, so the same rule holds for both: loopback unless proxy
authentication is set. `env --base-url` prints each client's settings for those listeners.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import secrets
import shlex
import shutil
import sys
from pathlib import Path

ADDON = Path(__file__).resolve().parents[2] / "tokunseba_addon.py"  # addon/, beside the package
DEFAULT_HOST, DEFAULT_PORT, DEFAULT_WEB_PORT = "127.0.0.1", 8080, 8081
BASE_URL_OFFSET = 2  # the base-URL listeners start at --port + 2 (--port + 1 is mitmweb's UI by default)
WILDCARD_HOSTS = ("0.0.0.0", "::", "")  # listen everywhere: clients on this machine use loopback
SYSTEM_BUNDLES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem")
# mitmweb's flow list: mitmproxy 12 reads web_columns as a list, one `--set web_columns=X` per
# column (one comma-joined value is a single unknown column: an empty list). The mark shows
# in the path column.
WEB_COLUMNS = ("tls", "icon", "path", "method", "status", "size", "time", "comment")


def add_commands(sub) -> None:
    """The commands this module defines: ``run``, ``env`` and ``check``."""
    add_run(sub)
    add_env(sub)
    from .check import add_check  # the check command's own module (cli/check.py)

    add_check(sub)


def add_run(sub) -> None:
    p = sub.add_parser("run", help="start the proxy (mitmdump, or mitmweb with --web) with the tokunseba addon",
                       description="Start mitmdump with the tokunseba addon, listening on loopback. Only the provider "
                       "hosts and your rules' HTTPS endpoint hosts are decrypted; other TLS passes through untouched. "
                       "The same process also listens as one plain-HTTP base-URL listener per provider (a reverse proxy "
                       "to its API host, same rules and ledger), for clients that cannot trust a CA: see "
                       "tokunseba env --base-url.",
                       epilog="then, in the client's shell: eval \"$(tokunseba env)\" (it prints the exact line, "
                       "with --port/--confdir when you changed them)")
    p.add_argument("--rules", metavar="FILE", default=os.environ.get("TOKUNSEBA_RULES"),
                   help="routing rules (YAML); default $TOKUNSEBA_RULES, else none (everything passes through)")
    p.add_argument("--host", default=DEFAULT_HOST,
                   help=f"listen address (default {DEFAULT_HOST}; loopback only unless you say otherwise). "
                   "Any other address needs proxy authentication: -- --proxyauth USER:PASS")
    p.add_argument("--port", default=str(DEFAULT_PORT),
                   help=f"listen port (default {DEFAULT_PORT}; 0 picks a free one)")
    p.add_argument("--base-url-port", metavar="PORT", default=None,
                   help="the first port of the base-URL listeners (no CA needed: point a client's base URL at one), "
                   "one per provider on consecutive ports: " + ", ".join(
                       f"{' / '.join(protos)} PORT+{i}" if i else f"{' / '.join(protos)} PORT"
                       for i, (_, protos) in enumerate(provider_listeners()))
                   + f" (default --port + {BASE_URL_OFFSET}: 8082 and on; 0, or --port 0, picks free ones, printed at "
                   "start)")
    p.add_argument("--no-base-url", action="store_true",
                   help="listen only as the HTTPS proxy (no base-URL listeners)")
    p.add_argument("--ledger", metavar="PATH|URL", default=os.environ.get("TOKUNSEBA_LEDGER"),
                   help="the ledger: a SQLite file, or postgresql://USER@HOST/DB?sslmode=... for one ledger shared by "
                   "several proxies (the password: in the URL, $PGPASSWORD or ~/.pgpass; never on the proxy's "
                   "command line). Default $TOKUNSEBA_LEDGER, else $TOKUNSEBA_HOME/ledger.db")
    p.add_argument("--otlp-endpoint", metavar="URL", default=None,
                   help="send one OpenTelemetry span per turn to this OTLP/HTTP collector (e.g. http://127.0.0.1:4318; "
                   "default $OTEL_EXPORTER_OTLP_ENDPOINT; neither: no spans). Needs tokunseba[otel]")
    p.add_argument("--otlp-bodies", action="store_true",
                   help="also put the request and reply text in the spans (off: no prompt or reply text)")
    p.add_argument("--instance", metavar="NAME", default=os.environ.get("TOKUNSEBA_INSTANCE"),
                   help="this proxy's name on its turns (stats --by instance, log --instance); default "
                   "$TOKUNSEBA_INSTANCE, else user@host")
    p.add_argument("--ledger-bodies", action="store_true", help="also store request/response bodies in the ledger")
    p.add_argument("--confdir", metavar="DIR", default=None, help="mitmproxy confdir holding its CA (default ~/.mitmproxy)")
    p.add_argument("--web", action="store_true", help="start mitmweb instead of mitmdump, to inspect flows in a browser")
    p.add_argument("--web-port", metavar="PORT", default=str(DEFAULT_WEB_PORT),
                   help=f"mitmweb's UI port (default {DEFAULT_WEB_PORT}); the UI needs the token in the URL "
                   "that run prints (http://127.0.0.1:PORT/?token=...)")
    p.add_argument("--dry-run", action="store_true", help="print the command instead of running it")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="also print mitmproxy's own lines: every connection (client/server connect, disconnect) and "
                   "every flow, provider or not. Without it the console shows one line per provider turn "
                   "(request id, client, model → route → endpoint, outcome, status, tokens as reported, time) "
                   "and warnings")
    p.add_argument("extra", nargs=argparse.REMAINDER, help="after --: extra arguments passed to mitmdump")
    p.set_defaults(func=cmd_run)


def add_env(sub) -> None:
    e = sub.add_parser("env", help="print the shell exports that point clients at the proxy",
                       description="Print shell exports for Claude Code (HTTPS_PROXY, NODE_EXTRA_CA_CERTS), Codex and the "
                       "Python SDKs (SSL_CERT_FILE: the system CA bundle plus mitmproxy's CA); with --base-url, each "
                       "client's settings for the base-URL listeners instead (no proxy, no CA).",
                       epilog='example: eval "$(tokunseba env)"; claude')
    e.add_argument("--host", default=DEFAULT_HOST,
                   help=f"the proxy's address as clients reach it (default {DEFAULT_HOST})")
    e.add_argument("--port", default=str(DEFAULT_PORT),
                   help=f"the proxy's port, as given to tokunseba run (default {DEFAULT_PORT})")
    e.add_argument("--confdir", metavar="DIR", default=None,
                   help="mitmproxy confdir holding its CA, as given to tokunseba run (default ~/.mitmproxy)")
    e.add_argument("--base-url", action="store_true",
                   help="instead: what each client needs to use the base-URL listeners (no proxy variable, no CA): "
                   "Claude Code, Codex, Gemini CLI and the SDKs")
    e.add_argument("--base-url-port", metavar="PORT", default=None,
                   help=f"with --base-url: the first base-URL port, as given to or printed by tokunseba run "
                   f"(default --port + {BASE_URL_OFFSET})")
    e.add_argument("--rules", metavar="FILE", default=None,
                   help="rules YAML (default: $TOKUNSEBA_RULES): also print Claude Code's context settings "
                   "(CLAUDE_CODE_MAX_CONTEXT_TOKENS, CLAUDE_CODE_AUTO_COMPACT_WINDOW) for the smallest context_tokens: "
                   "of an endpoint a route may send its main turns to")
    e.set_defaults(func=cmd_env)


def port_number(name: str, text: str, lowest: int) -> int:
    """A TCP port from the command line; ValueError with a one-line message otherwise."""
    try:
        n = int(text)
    except ValueError:
        n = -1
    if not lowest <= n <= 65535:
        raise ValueError(f"{name}: expected a port number from {lowest} to 65535, got {text!r}")
    return n


def _ports(args, **names: int) -> str | None:
    """Check the port options (attribute -> lowest allowed) in place; the error line, or None."""
    try:
        for attr, lowest in names.items():
            setattr(args, attr, port_number("--" + attr.replace("_", "-"), str(getattr(args, attr)), lowest))
    except ValueError as e:
        return f"error: {e}"
    return None


def provider_listeners() -> list[tuple[str, tuple[str, ...]]]:
    """(provider host, the client protocols it serves) for each base-URL listener, in the
    registry's order (protocols/: Anthropic, OpenAI Chat + Responses, Gemini). A protocol's
    backend hosts (chatgpt.com) get none: they are reached through the proxy."""
    from ..protocols import api_hosts

    return list(api_hosts().items())


def base_url_ports(port: int, first: int | None) -> list[int]:
    """The base-URL listeners' ports: consecutive from ``first`` (default ``port`` +
    BASE_URL_OFFSET); all 0 (free ones to pick) when ``first`` is 0, or unset with ``port`` 0.
    ValueError when the last one would pass 65535."""
    n = len(provider_listeners())
    if first is None:
        first = 0 if port == 0 else port + BASE_URL_OFFSET
    if first == 0:
        return [0] * n
    if first + n - 1 > 65535:
        raise ValueError(f"--base-url-port: the base-URL ports {first} to {first + n - 1} pass 65535; give "
                         f"--base-url-port N (0 picks free ones) or --no-base-url")
    return [first + i for i in range(n)]


def free_ports(host: str, n: int, tries: int = 64) -> list[int]:
    """``n`` consecutive ports free on ``host`` now (so one --base-url-port names them all):
    the OS picks the first, the next ones are tried; held together while picking."""
    import socket

    info = socket.getaddrinfo(host or None, 0, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    for _ in range(tries):
        socks: list[socket.socket] = []
        try:
            first = socket.socket(info[0], info[1], info[2])
            socks.append(first)
            first.bind(info[4])
            port = first.getsockname()[1]
            if port + n - 1 > 65535:
                continue
            for i in range(1, n):
                s = socket.socket(info[0], info[1], info[2])
                socks.append(s)
                s.bind((info[4][0], port + i, *info[4][2:]))
            return [port + i for i in range(n)]
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise SystemExit(f"error: found no {n} consecutive free ports on {host}; give --base-url-port N")


def base_urls(host: str, ports: list[int]) -> list[tuple[str, tuple[str, ...], str]]:
    """(provider host, its client protocols, the listener's URL) for each base-URL listener."""
    shown = "127.0.0.1" if host in WILDCARD_HOSTS else host
    shown = f"[{shown}]" if ":" in shown and not shown.startswith("[") else shown
    return [(h, protos, f"http://{shown}:{p}") for (h, protos), p in zip(provider_listeners(), ports)]


def _user_modes(extra: list[str]) -> bool:
    """The user gave mitmproxy modes of their own after -- (then the proxy's mode is theirs)."""
    return any(a in ("--mode", "-m") or a.startswith("--mode=") or (a.startswith("-m") and not a.startswith("--"))
               for a in extra)


def confdir(arg: str | None) -> Path:
    return Path(arg).expanduser() if arg else Path.home() / ".mitmproxy"


def tool_path(name: str) -> str:
    """mitmdump/mitmweb from the same environment as this tokunseba."""
    here = Path(sys.executable).parent / name
    if here.exists():
        return str(here)
    found = shutil.which(name)
    if not found:
        raise SystemExit(f"error: {name} not found (install tokunseba with scripts/setup.sh)")
    return found


def web_login(token: str | None = None) -> tuple[str, str]:
    """A fresh random token for mitmweb's UI and the argon2 hash mitmweb is given
    (`web_password` starting with `$`), so the token itself never appears in the process list."""
    import argon2  # mitmproxy's own dependency (mitmweb checks web_password with it)

    token = token or secrets.token_hex(16)
    return token, argon2.PasswordHasher().hash(token)


# mitmweb's Search box as it opens: the flows tokunseba handled (a provider turn's reply carries
# this header); Claude Code's other calls (settings, telemetry: most flows) stay out of sight
MODEL_TURNS = "~h x-tokunseba-request-id"


def web_url(port: int, token: str, host: str = "127.0.0.1", search: str | None = None) -> str:
    """mitmweb's UI URL with its token; with ``search``, opening on that filter (mitmweb 12 reads
    it from the fragment: ``#/flows?s=…``)."""
    from urllib.parse import quote

    return f"http://{host}:{port}/?token={token}" + (f"#/flows?s={quote(search, safe='')}" if search else "")


@functools.cache
def _rules(path: str):
    """The rules file, loaded once for all that ``run`` says before mitmdump starts (start-up
    time: mitmdump's addon loads it again, as it must)."""
    from ..routing import load_rules

    return load_rules(path)


def _routes_nothing(path: str) -> str | None:
    """What to say when a rules file routes nothing (rules/default.yaml does not), else None."""
    from ..routing import RulesError, counts_line

    try:
        rules = _rules(path)
    except RulesError:
        return None  # build_command has said why already
    if rules.routes:
        return None
    return (f"{path} has no routes: " + counts_line(rules).split(" — ", 1)[-1]
            + " (rules/examples/ has setups that route; `tokunseba check FILE` says what a file does)")


def build_command(args, web_password_hash: str | None = None) -> list[str]:
    from ..protocols import provider_hosts

    hosts = list(provider_hosts())
    if args.rules:
        from ..routing import RulesError

        from ..pricing import PricesError, rules_prices

        try:
            rules = _rules(args.rules)
            rules_prices(args.rules)  # its prices: the proxy reads them too (pricing/)
        except (RulesError, PricesError) as e:
            raise SystemExit(f"error: {e}")
        for ep in rules.endpoints.values():
            if ep.url.startswith("https://") and ep.host not in hosts:
                hosts.append(ep.host)
    tool = tool_path("mitmweb" if args.web else "mitmdump")
    cmd = [tool, "--listen-host", args.host, "-p", str(args.port), "-s", str(ADDON),
           "--set", "connection_strategy=lazy"]
    ports = getattr(args, "base_url_ports", None) or []
    if ports:  # a --mode replaces mitmproxy's default (regular): say it, unless the user chose theirs
        if not _user_modes(args.extra or []):
            cmd += ["--mode", "regular"]
        for (h, _), p in zip(provider_listeners(), ports):
            cmd += ["--mode", f"reverse:https://{h}@{p}"]
    for h in hosts:
        cmd += ["--set", f"allow_hosts=^{re.escape(h)}:443$"]
    if args.rules:
        cmd += ["--set", f"tokunseba_rules={os.path.abspath(args.rules)}"]
    if args.ledger:
        cmd += ["--set", f"tokunseba_ledger={ledger_option(args.ledger)}"]
    if args.ledger_bodies:
        cmd += ["--set", "tokunseba_ledger_bodies=true"]
    if args.instance:
        cmd += ["--set", f"tokunseba_instance={args.instance}"]
    if args.otlp_endpoint:
        cmd += ["--set", f"tokunseba_otlp_endpoint={args.otlp_endpoint}"]
    if args.otlp_bodies:
        cmd += ["--set", "tokunseba_otlp_bodies=true"]
    if args.confdir:
        cmd += ["--set", f"confdir={args.confdir}"]
    if not getattr(args, "verbose", False):  # one line per provider turn; mitmproxy's own lines with -v
        cmd += ["--set", "tokunseba_console=turns"]
        if not args.web:  # mitmweb has no flow dump (and no flow_detail option)
            cmd += ["--set", "flow_detail=0"]
    if args.web:
        cmd += ["--set", "store_streamed_bodies=true", "--set", f"web_port={args.web_port}",
                "--set", "web_host=127.0.0.1", "--set", "web_open_browser=false"]
        for column in WEB_COLUMNS:
            cmd += ["--set", f"web_columns={column}"]
        if web_password_hash:
            cmd += ["--set", f"web_password={web_password_hash}"]
    extra = [a for a in (args.extra or []) if a != "--"]
    return _without_options(cmd, _set_names(extra)) + extra


def _set_names(argv: list[str]) -> set[str]:
    """The mitmproxy option names ``argv`` sets (``--set NAME=V`` or ``--set=NAME=V``)."""
    names = set()
    for i, a in enumerate(argv):
        value = argv[i + 1] if a == "--set" and i + 1 < len(argv) else a[6:] if a.startswith("--set=") else None
        if value and "=" in value:
            names.add(value.split("=", 1)[0].strip())
    return names


def _without_options(cmd: list[str], names: set[str]) -> list[str]:
    """``cmd`` without its own ``--set NAME=V`` for each option the user set after ``--``: the
    user's value wins (mitmproxy refuses an option given twice: "Received multiple values")."""
    out: list[str] = []
    i = 0
    while i < len(cmd):
        if cmd[i] == "--set" and i + 1 < len(cmd) and cmd[i + 1].split("=", 1)[0] in names:
            i += 2
            continue
        out.append(cmd[i])
        i += 1
    return out


def cli_command(argv0: str | None = None) -> str:
    """How to call this tokunseba from another shell: ``tokunseba`` when that name on PATH is
    this very command, else its absolute path (``.venv/bin/tokunseba`` typed in the project
    directory: the client's shell may be elsewhere)."""
    p = Path(argv0 if argv0 is not None else sys.argv[0])
    if p.name != "tokunseba":  # not the console script (python -m, or in-process): the one beside python
        p = Path(sys.executable).parent / "tokunseba"
    on_path = shutil.which("tokunseba")
    try:
        if on_path and p.exists() and os.path.samefile(on_path, p):
            return "tokunseba"
    except OSError:
        pass
    return str(p.absolute()) if p.exists() else "tokunseba"


def port_in_use(host: str, port: int) -> bool:
    """Would mitmproxy fail to listen on host:port because something already does? (It binds
    with SO_REUSEADDR, as asyncio does.)"""
    import socket

    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError:
        return False  # mitmproxy says what is wrong with the address
    for family, kind, proto, _, addr in infos[:1]:
        with socket.socket(family, kind, proto) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(addr)
            except OSError as e:
                import errno

                return e.errno == errno.EADDRINUSE
    return False


def env_command(host: str, port: int | str, conf: str | None) -> str:
    """The `tokunseba env` line that matches a `tokunseba run` (only the options that differ)."""
    argv = [cli_command(), "env"]
    if host not in (DEFAULT_HOST, *WILDCARD_HOSTS):
        argv += ["--host", host]
    if port != DEFAULT_PORT:
        argv += ["--port", str(port)]
    if conf:
        argv += ["--confdir", str(confdir(conf).absolute())]  # the client's shell may be elsewhere
    return f'eval "$({shlex.join(argv)})"'


def base_url_env_command(host: str, port: int, first: int) -> str:
    """The `tokunseba env --base-url` line that matches a `tokunseba run` (only what differs)."""
    argv = [cli_command(), "env", "--base-url"]
    if host not in (DEFAULT_HOST, *WILDCARD_HOSTS):
        argv += ["--host", host]
    if first != (port or DEFAULT_PORT) + BASE_URL_OFFSET or port == 0:
        argv += ["--base-url-port", str(first)]
    elif port != DEFAULT_PORT:
        argv += ["--port", str(port)]
    return shlex.join(argv)


def exposure_problem(host: str, extra: list[str]) -> str | None:
    """Why listening on ``host`` would make an open proxy, or None: a non-loopback address
    without mitmproxy's proxy authentication lets anyone who reaches it spend the endpoints' keys."""
    from ..addresses import is_loopback

    if host == "localhost" or is_loopback(host):
        return None
    if any(a.startswith("--proxyauth") or a.startswith("proxyauth=") for a in extra):
        return None
    return (f"error: --host {host} listens beyond this machine without proxy authentication, so anyone who can "
            f"reach it could use your endpoints and their keys; add `-- --proxyauth USER:PASS` "
            f"(or use --host {DEFAULT_HOST})")


def ledger_option(ledger: str) -> str:
    """The ledger as the addon is given it: a file path made absolute; a URL without its
    password (moved to $PGPASSWORD, which the proxy inherits: never in its command line)."""
    from ..ledger import take_password, url_scheme

    if url_scheme(ledger):
        return take_password(ledger) or ledger
    return os.path.abspath(ledger)


def ledger_problem(ledger: str | None) -> str | None:
    """The error line when ``ledger`` is a URL tokunseba cannot open (never taken for a file)."""
    from ..ledger import LedgerError, LedgerReader, url_scheme
    from ..credentials import redact_url

    if ledger is None or url_scheme(ledger) is None:
        return None
    try:
        LedgerReader.check_target(ledger)
    except LedgerError as e:
        return f"error: {e}"
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        return (f"error: the ledger {redact_url(ledger)} needs psycopg: pip install 'tokunseba[postgresql]' "
                "(psycopg 3 and its pool)")
    return None


def ledger_warning(ledger: str | None) -> str | None:
    """A warning line when an existing ledger (or its -wal/-shm) is readable by others."""
    from ..ledger import default_ledger_path, readable_by_others, url_scheme

    if ledger and url_scheme(ledger):
        return None
    path = Path(ledger).expanduser() if ledger else default_ledger_path()
    loose = readable_by_others(path)
    if not loose:
        return None
    return (f"tokunseba: warning: the ledger is readable by other users: {', '.join(loose)}; "
            f"fix with: chmod 600 {shlex.quote(str(path))}*")


def cmd_run(args) -> int:
    if err := run_problem(args):
        print(err, file=sys.stderr)
        return 2
    if args.base_url_ports and 0 in args.base_url_ports:  # mitmproxy takes one listener per port: pick them here
        args.base_url_ports = free_ports(args.host, len(args.base_url_ports))
    token, hashed = web_login() if args.web else (None, None)
    cmd = build_command(args, hashed)
    if warning := ledger_warning(args.ledger):
        print(warning, file=sys.stderr)
    from ..ledger import spool_note

    if note := spool_note(args.ledger):
        print(note, file=sys.stderr)
    ui = web_ui_lines(args, token)
    if args.dry_run:
        print(shlex.join(cmd))
        if ui:
            print(ui, file=sys.stderr)
        return 0
    announce(args, cmd)
    if ui:
        print(ui, file=sys.stderr)
    sys.stderr.flush()
    os.environ["TOKUNSEBA_CLI"] = cli_command()  # the addon's hints name the command that works here
    os.execv(cmd[0], cmd)
    return 0  # pragma: no cover


def run_problem(args) -> str | None:
    """What stops ``run`` before it starts (its message), checked in this order: the ports, the
    base-URL listeners' ports (set on ``args.base_url_ports``), exposure, the ledger, the OTLP
    collector, two listeners on one port, a port in use."""
    if err := _ports(args, port=0, web_port=0, **({"base_url_port": 0} if args.base_url_port is not None else {})):
        return err
    try:
        args.base_url_ports = [] if args.no_base_url else base_url_ports(args.port, args.base_url_port)
    except ValueError as e:
        return f"error: {e}"
    if err := exposure_problem(args.host, args.extra or []):
        return err
    if err := ledger_problem(args.ledger):
        return err
    if args.otlp_endpoint:
        from ..addresses import collector_problem as endpoint_problem

        if problem := endpoint_problem(args.otlp_endpoint):
            return f"error: --otlp-endpoint: {problem}"
    listening = [("--port", args.port), *((("--web-port", args.web_port),) if args.web else ()),
                 *(("--base-url-port", p) for p in args.base_url_ports)]
    taken = [p for _, p in listening if p]
    if len(set(taken)) != len(taken):
        return (f"error: two listeners on one port ({', '.join(f'{w} {p}' for w, p in listening if p)}); "
                f"give --base-url-port N (0 picks free ones) or another --port / --web-port")
    for what, port in listening:
        if port and not args.dry_run and port_in_use(args.host, port):
            return (f"error: {args.host}:{port} is already in use (another tokunseba run, mitmproxy, or a local "
                    "model " + (f"server?); start on other ports with {what} N ({what} 0 picks free ones; the base-URL "
                                "listeners take N and the next ones), or --no-base-url" if what == "--base-url-port" else
                                f"server?); start on another port with {what} N ({what} 0 picks a free one)")
                    + (", then point clients at it with the `tokunseba env --port N` line run prints"
                       if what == "--port" else ""))
    return None


def web_ui_lines(args, token: str | None) -> str | None:
    """The lines that say where mitmweb's UI is (with ``--web``), or None."""
    if not token:
        return None
    where = web_url(args.web_port, token) if args.web_port else f"http://127.0.0.1:PORT/?token={token}"
    ui = f"tokunseba: mitmweb UI (open this URL; the token is new on every start):  {where}"
    if args.web_port:
        ui += (f"\ntokunseba: mitmweb on the model turns only (Search: {MODEL_TURNS}; clear it for every flow):  "
               + web_url(args.web_port, token, search=MODEL_TURNS))
    return ui


def announce(args, cmd: list[str]) -> None:
    """What ``run`` says on stderr as it starts: the tool and its address, the rules, how clients
    point at it, the base-URL listeners."""
    tool = Path(cmd[0]).name
    print(f"tokunseba: starting {tool} on {args.host}:{args.port}"
          f" ({'rules ' + args.rules if args.rules else 'no rules: everything passes through'})", file=sys.stderr)
    if args.rules and (quiet := _routes_nothing(args.rules)):
        print(f"tokunseba: note: {quiet}", file=sys.stderr)
    if args.port == 0:
        shown = "*" if args.host in WILDCARD_HOSTS else args.host
        print(f"tokunseba: {tool} prints the port it picked (\"proxy listening at {shown}:N\"); "
              f"point clients at it with:  {env_command(args.host, 'N', args.confdir)}", file=sys.stderr)
    else:
        print(f"tokunseba: point clients at it with:  {env_command(args.host, args.port, args.confdir)}",
              file=sys.stderr)
    if args.base_url_ports:
        urls = " · ".join(f"{' / '.join(protos)} {url}" for _, protos, url in base_urls(args.host, args.base_url_ports))
        print(f"tokunseba: base URLs (no proxy, no CA: each forwards only to its provider, same rules and ledger):  "
              f"{urls}", file=sys.stderr)
        print(f"tokunseba: each client's settings for them:  "
              f"{base_url_env_command(args.host, args.port, args.base_url_ports[0])}", file=sys.stderr)


def ca_bundle(conf: Path) -> Path:
    """System CA bundle + mitmproxy's CA in one file, so SSL_CERT_FILE users can still reach
    hosts the proxy does not decrypt."""
    from ..ledger import private_dir, tokunseba_home

    ca = conf / "mitmproxy-ca-cert.pem"
    home = tokunseba_home()
    out = home / "ca-bundle.pem"
    parts: list[bytes] = []
    for b in SYSTEM_BUNDLES:
        if os.path.exists(b):
            parts.append(Path(b).read_bytes())
            break
    if ca.exists():
        parts.append(ca.read_bytes())
    try:
        private_dir(home)
        data = b"\n".join(parts)
        if not out.exists() or out.read_bytes() != data:
            out.write_bytes(data)
    except OSError:
        return ca
    return out


def env_lines(host: str, port: int, conf: Path) -> list[str]:
    ca = conf / "mitmproxy-ca-cert.pem"
    proxy = f"http://[{host}]:{port}" if ":" in host and not host.startswith("[") else f"http://{host}:{port}"
    lines = [f"export HTTPS_PROXY={shlex.quote(proxy)}",
             f"export HTTP_PROXY={shlex.quote(proxy)}",
             "export NO_PROXY=localhost,127.0.0.1,::1",
             f"export NODE_EXTRA_CA_CERTS={shlex.quote(str(ca))}   # Claude Code (Node)",
             f"export SSL_CERT_FILE={shlex.quote(str(ca_bundle(conf)))}   # Codex, Python SDKs (system CAs + mitmproxy CA)"]
    if not ca.exists():
        lines.insert(0, f"# note: {ca} does not exist yet: start the proxy once (tokunseba run) to create it")
    return lines


def base_url_lines(host: str, ports: list[int]) -> list[str]:
    """What each client needs to use the base-URL listeners: no proxy variable, no CA. Measured
    with the pinned clients (README "No CA: base URLs"); the facts are protocols/clients.py's."""
    from ..protocols import anthropic, gemini, openai_chat
    from ..protocols import clients as c

    url = {h: u for h, _, u in base_urls(host, ports)}
    by_protocol = {p: url[h] for h, protos in provider_listeners() for p in protos}
    ant, oai, gem = (by_protocol[m.PROTOCOL] for m in (anthropic, openai_chat, gemini))
    prov = c.CODEX_BASE_URL_PROVIDER
    # one -c per field: no quotes inside the alias (Codex reads a value that is not TOML as a string)
    codex_fields = {"name": prov, "base_url": oai + c.OPENAI_SDK_PATH, "wire_api": c.CODEX_WIRE_API,
                    "env_key": c.CODEX_BASE_URL_KEY_ENV}
    codex_args = " ".join([f"-c model_provider={prov}",
                           *(f"-c model_providers.{prov}.{k}={v}" for k, v in codex_fields.items())])
    settings = '{"security": {"auth": {"selectedType": "' + c.GEMINI_CLI_API_KEY_AUTH + '"}}}'
    return [
        "# tokunseba base URLs: no HTTPS_PROXY, no CA; `tokunseba run` must be running. Each listener forwards",
        "# only to its own provider host, through the same rules and ledger as the proxy.",
        "# (HTTPS_PROXY and the CA variables of `tokunseba env` are not needed for these)",
        f"# Claude Code (also the anthropic SDKs), with your key as always ({c.CLAUDE_CODE_KEY_ENVS}):",
        f"export {c.CLAUDE_CODE_BASE_URL_ENV}={shlex.quote(ant)}",
        f"# Codex (its OPENAI_BASE_URL variable was removed): a provider with the Responses wire API, given on "
        f"the command line (or as [model_providers.{prov}] in config.toml), key in ${c.CODEX_BASE_URL_KEY_ENV}:",
        f"alias codex={shlex.quote('codex ' + codex_args)}",
        f"#   config.toml instead: [model_providers.{prov}] "
        + " ".join(f'{k} = "{v}"' for k, v in codex_fields.items()) + f', and model_provider = "{prov}" at the top',

        f"# Gemini CLI: the base URL, and an API key (${c.GEMINI_CLI_KEY_ENV}) chosen in its settings "
        f"(~/.gemini/settings.json): {settings}",
        f"export {c.GEMINI_CLI_BASE_URL_ENV}={shlex.quote(gem)}",
        "# the openai SDKs read this (Codex does not):",
        f"export {c.OPENAI_SDK_BASE_URL_ENV}={shlex.quote(oai + c.OPENAI_SDK_PATH)}",
        f"# in code: anthropic.Anthropic(base_url={ant!r}) · openai.OpenAI(base_url={oai + c.OPENAI_SDK_PATH!r}) · "
        f"genai.Client(http_options=types.HttpOptions(base_url={gem!r}))",
    ]


def cmd_env(args) -> int:
    if err := _ports(args, port=1, **({"base_url_port": 1} if args.base_url_port is not None else {})):
        print(err, file=sys.stderr)
        return 2
    if args.base_url:
        try:
            ports = base_url_ports(args.port, args.base_url_port)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print("\n".join(base_url_lines(args.host, ports)))
        return 0
    lines = env_lines(args.host, args.port, confdir(args.confdir))
    if path := args.rules or os.environ.get("TOKUNSEBA_RULES"):
        from ..routing import RulesError, load_rules
        from .context_env import context_lines

        try:
            lines += context_lines(load_rules(path))
        except RulesError as e:
            if args.rules:
                print(f"error: {e}", file=sys.stderr)
                return 1
            lines.append(f"# $TOKUNSEBA_RULES not read, so no context settings: {e}")  # the exports above still hold
    print("\n".join(lines))
    return 0
