"""The repository explains itself (issue 28): every document the code cites is in ``docs/``,
every section it cites is there, and every module a docstring or comment names exists.

- A ``name.md`` in addon/, tests/, scripts/, rules/, README.md, pyproject.toml or docs/ is a
  file of the repository (``README.md``, ``docs/x.md``); a bare ``x.md`` must be ``docs/x.md``.
  The labels after it (``§4b``, ``rule 6``, ``C.3``, ``D.3.7``, ``2.3-2.5``, ``15``) are headings
  of that document (``## §4b …``, ``### Rule 6. …``, ``### C.3 …``) or, in docs/dev/pitfalls.md, its
  numbered items. ``pitfalls 7`` without the file is not a reference a newcomer can follow.
- In docstrings and comments, a ``tokunseba.a.b`` path names a module or package (a last part
  may be a name that module defines), a ``a/b.py`` path names a file, and a module name the
  package used to have (``ledger_pg``, ``web_redact``, ``bridge``, …) is not used at all.
"""

from __future__ import annotations

import ast
import importlib.util
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
DEV = DOCS / "dev"  # the references whose sections the code cites (§4, A.6, pitfalls' numbered items)
PKG = ROOT / "addon" / "tokunseba"
HERE = Path(__file__).resolve()

# files whose name ends in .md without being a reference: a file a test writes itself
NOT_REFERENCES = {"system.md"}

# dotted names that are not modules: OpenTelemetry span attributes (proxy/otel_spans.py)
NOT_MODULES = {"tokunseba.request.body", "tokunseba.response.body"}

# a docstring or comment that describes the tree before issue 23's packages names its modules
HISTORY = re.compile(r"before (?:issue 23|the packages)")

# module names the package used to have (each moved or went; git log -M --diff-filter=RD)
RETIRED = {
    "bridge", "cli_prices", "cli_read", "cli_run", "cli_sessions", "cli_shadow", "ledger_batch",
    "ledger_dialect", "ledger_pg", "ledger_scrub", "ledger_shared", "ledger_spool",
    "ledger_writer", "mitmweb_style", "reasoning_state", "reasoning_store", "shadow_scope",
    "shadow_sender", "shadow_view", "anthropic_stream", "chat_stream", "responses_reply",
    "responses_request", "responses_stream", "sniff", "web_redact",
}

LABEL = r"(?:§?\d+[a-z]?(?:\.\d+)*|[A-E](?:\.\d+)*(?![\w'])|[Rr]ule \d+)"
REF = re.compile(r"(?<![\w/.-])((?:[\w-]+/)*[\w-]+\.md)((?:(?:[ ,/;]|-(?=[§\dA-E])|\band\b)+" + LABEL + r")*)")
BARE_PITFALL = re.compile(r"(?<!\.md )\bpitfalls? \d")


def _sources(*suffixes: str) -> list[Path]:
    out = []
    for top in ("addon", "tests", "scripts", "rules"):
        for p in sorted((ROOT / top).rglob("*")):
            if p.suffix in suffixes and p.is_file() and ".egg-info" not in str(p) and "/data/" not in str(p):
                out.append(p)
    return out


def _labels(doc: Path) -> set[str]:
    """The labels a document can be cited by: its headings' first words, its numbered items."""
    found: set[str] = set()
    for line in doc.read_text().splitlines():
        m = re.match(r"#+\s+(?:(Rule \d+)|§?(\d+[a-z]?(?:\.\d+)*|[A-E](?:\.\d+)*))[.:\s]", line + " ")
        if m:
            found.add((m.group(1) or m.group(2)).lower())
        m = re.match(r"(\d+)\. ", line)
        if m and doc.name == "pitfalls.md":
            found.add(m.group(1))
    return found


def _expand(labels: str) -> list[str]:
    """``§3.5, §4`` -> ["3.5", "4"]; ``A.1-A.5`` -> ["a.1", "a.5"]; ``§2 rule 4`` -> ["2", "rule 4"]."""
    return [x.lower().lstrip("§") for x in re.findall(LABEL, labels)]


def _dangling_documents() -> list[str]:
    bad = []
    files = _sources(".py", ".sh", ".yaml", ".yml") + [ROOT / "README.md", ROOT / "pyproject.toml"]
    files += sorted(DOCS.rglob("*.md"))
    cache: dict[Path, set[str]] = {}
    for f in files:
        if f == HERE:
            continue
        for n, line in enumerate(f.read_text().splitlines(), 1):
            where = f"{f.relative_to(ROOT)}:{n}"
            for m in REF.finditer(line):
                name, labels = m.group(1), m.group(2)
                if name in NOT_REFERENCES:
                    continue
                if f.is_relative_to(DOCS) and "/" not in name:
                    name = str((f.parent / name).relative_to(ROOT))  # a link between documents of one folder
                doc = ROOT / name if "/" in name or name == "README.md" else None
                if doc is None:
                    bad.append(f"{where}: {name} (write docs/{name} when it is a document of docs/)")
                    continue
                if not doc.is_file() or not doc.resolve().is_relative_to(ROOT):
                    bad.append(f"{where}: {name} is not a file of the repository")
                    continue
                if doc.parent != DEV:
                    continue
                have = cache.setdefault(doc, _labels(doc))
                bad += [f"{where}: {name} has no section {x!r}" for x in _expand(labels) if x not in have]
            if BARE_PITFALL.search(line):
                bad.append(f"{where}: a pitfall cited without its document (docs/dev/pitfalls.md N)")
    return bad


def _prose(path: Path) -> list[tuple[int, str]]:
    """A Python file's docstrings and comments, each with its line."""
    text = path.read_text()
    out = [(tok.start[0], tok.string) for tok in tokenize.generate_tokens(io.StringIO(text).readline)
           if tok.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                out.append((body[0].lineno, body[0].value.value))
    return out


def _defines(module: Path, name: str) -> bool:
    src = module.read_text()
    return re.search(rf"^\s*(?:async def|def|class) {name}\b|^\s*{name}\s*[:=]|import .*\b{name}\b", src, re.M) is not None


def _module_exists(dotted: str) -> bool:
    parts = dotted.split(".")[1:]
    here = PKG
    for i, part in enumerate(parts):
        if (here / part).is_dir():
            here = here / part
            continue
        if (here / f"{part}.py").is_file():
            rest = parts[i + 1:]
            return not rest or _defines(here / f"{part}.py", rest[0])
        init = here / "__init__.py"
        return init.is_file() and _defines(init, part)
    return True


def _mitmproxy_dir() -> Path | None:
    spec = importlib.util.find_spec("mitmproxy")  # found, not imported
    return Path(spec.origin).parent if spec and spec.origin else None


def _file_exists(path: str, near: Path) -> bool:
    """``a/b.py`` from the repository, the package, the file's own folder or its parent, or
    mitmproxy's (``mitmproxy/tools/main.py``, ``addons/termlog.py``); a bare ``b.py`` anywhere
    in the package, tests, scripts or mitmproxy."""
    mitm = _mitmproxy_dir()
    bases = [ROOT, ROOT / "addon", PKG, near.parent, near.parent.parent, ROOT / "tests", ROOT / "scripts"]
    bases += [mitm.parent, mitm] if mitm else []
    if any((b / path).is_file() for b in bases):
        return True
    if "/" in path:
        return False
    tops = [PKG, ROOT / "tests", ROOT / "scripts"] + ([mitm] if mitm else [])
    return any(next(t.rglob(path), None) is not None for t in tops)


def _dangling_modules() -> list[str]:
    bad = []
    for f in _sources(".py"):
        if f == HERE:
            continue
        for line, text in _prose(f):
            if HISTORY.search(text):
                continue
            where = f"{f.relative_to(ROOT)}:{line}"
            for dotted in re.findall(r"(?<![\w/.])tokunseba(?:\.\w+)+", text):
                if dotted not in NOT_MODULES and not _module_exists(dotted):
                    bad.append(f"{where}: no module {dotted}")
            for path in re.findall(r"(?<![\w/.-])((?:[\w-]+/)*\w+\.py)\b", text):
                if not _file_exists(path, f):
                    bad.append(f"{where}: no file {path}")
            for word in re.findall(r"(?<![\w/.-])(\w+)(?![\w-])", text):
                if word in RETIRED:
                    bad.append(f"{where}: {word} is a module that is gone")
    return bad


def test_every_cited_document_and_section_is_in_docs():
    bad = _dangling_documents()
    assert not bad, f"{len(bad)} dangling document references:\n" + "\n".join(bad)


def test_every_module_a_docstring_or_comment_names_exists():
    bad = _dangling_modules()
    assert not bad, f"{len(bad)} dangling module references:\n" + "\n".join(bad)


def test_the_reference_checker_sees_what_it_must():
    """The patterns themselves: a reference to a missing section, a bare document and a module
    that is gone are each found."""
    assert _expand(" §2 rule 4") == ["2", "rule 4"]
    assert _expand(" A.1-A.5, E.1/E.2") == ["a.1", "a.5", "e.1", "e.2"]
    m = REF.search("(docs/dev/protocols.md C.3, E.5 \"A stream\")")
    assert m and m.group(1) == "docs/dev/protocols.md" and _expand(m.group(2)) == ["c.3", "e.5"]
    assert REF.search("see design.md rule 6").group(1) == "design.md"  # bare: reported
    assert BARE_PITFALL.search("# derived (pitfalls 7)") and not BARE_PITFALL.search("docs/dev/pitfalls.md 7")
    assert not _module_exists("tokunseba.mitm") and _module_exists("tokunseba.proxy.mitm")
    assert _module_exists("tokunseba.translate.request")  # a name translate/__init__.py defines


LINK = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")


def _heading_anchors(doc: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation gone, spaces as hyphens."""
    out = set()
    for line in doc.read_text().splitlines():
        if m := re.match(r"#+ (.*)", line):
            out.add(re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-"))
    return out


def test_every_markdown_link_of_the_readme_and_docs_resolves():
    """A link of README.md or a page of docs/ (``[text](../guide/x.md#anchor)``) names a file of
    the repository, relative to the page, and an anchor that is one of that page's headings."""
    bad = []
    for page in [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]:
        for n, line in enumerate(page.read_text().splitlines(), 1):
            for m in LINK.finditer(line):
                target, anchor = m.group(1), m.group(2)
                if "://" in target:
                    continue
                doc = (page.parent / target).resolve()
                where = f"{page.relative_to(ROOT)}:{n}"
                if not doc.is_file() or not doc.is_relative_to(ROOT):
                    bad.append(f"{where}: {target} is not a file of the repository")
                elif anchor and doc.suffix == ".md" and anchor[1:] not in _heading_anchors(doc):
                    bad.append(f"{where}: {target} has no heading {anchor}")
    assert not bad, "\n".join(bad)
