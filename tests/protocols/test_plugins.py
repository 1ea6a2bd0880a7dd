"""Finding the protocols (protocols/plugins.py): an entry point declared as a line loads as
``EntryPoint.load`` would; the group's lines are read straight from a distribution's
entry_points.txt, and only a line beyond the built-ins' makes ``importlib.metadata`` be asked;
``TOKUNSEBA_PLUGINS`` chooses the outside plugins; a plugin that fails is left out and said, a
built-in that fails is raised."""

from __future__ import annotations

import pytest

from tokunseba.protocols import plugins
from tokunseba.protocols.plugins import BUILTIN, GROUP, Declared, Origin


def dist(folder, name: str, text: str | None) -> None:
    d = folder / f"{name}.dist-info"
    d.mkdir(parents=True)
    if text is not None:
        (d / "entry_points.txt").write_text(text)


def test_a_declared_line_loads_its_object():
    assert Declared("x", "tokunseba.protocols.plugins:Declared.load").load() is Declared.load
    assert Declared("anthropic", BUILTIN["anthropic"]).load().__name__ == "register_protocols"


def test_the_groups_lines_of_an_entry_points_file():
    text = (f"[console_scripts]\ntokunseba = tokunseba.cli:main\n\n[{GROUP}]\n# a comment\n"
            "acme = tokunseba_acme:register_protocols\n; another\n\n[other]\nz = y:x\n")
    assert plugins._lines_of_group(text) == {"acme=tokunseba_acme:register_protocols"}


def test_only_a_line_beyond_the_built_ins_is_an_outsider(tmp_path):
    ours = f"[{GROUP}]\n" + "".join(f"{n} = {v}\n" for n, v in BUILTIN.items())
    dist(tmp_path, "tokunseba-1.0", ours)
    dist(tmp_path, "requests-2.0", "[console_scripts]\nx = y:z\n")
    dist(tmp_path, "no_entry_points-1.0", None)
    assert not plugins._outsiders_declared([str(tmp_path), str(tmp_path / "does-not-exist")])
    dist(tmp_path, "tokunseba_acme-0.1", f"[{GROUP}]\nacme = tokunseba_acme:register_protocols\n")
    assert plugins._outsiders_declared([str(tmp_path)])
    zipped = tmp_path / "lib.zip"
    zipped.write_bytes(b"PK")
    assert plugins._outsiders_declared([str(zipped)])  # unsure: importlib.metadata decides


def test_the_environment_chooses_the_outside_plugins():
    assert plugins.wanted("") == frozenset() and plugins.wanted(" acme , ,echo") == frozenset({"acme", "echo"})
    assert [d.name for d in plugins.discovered(frozenset())] == list(BUILTIN)  # the built-ins always, first


def test_where_a_protocol_came_from():
    assert str(Origin("anthropic", "tokunseba", None, True)) == "built in"
    assert str(Origin("acme", "tokunseba-acme", "0.1")) == "plugin acme (tokunseba-acme 0.1)"
    assert str(Origin("acme", None, None)) == "plugin acme (?)"


def test_a_broken_outside_plugin_is_left_out_and_said(monkeypatch):
    monkeypatch.setattr(plugins, "_problems", [])  # this test's problem is said in no other test's --help
    builtins = [Declared(n, v) for n, v in BUILTIN.items()]
    monkeypatch.setattr(plugins, "discovered", lambda only: [*builtins, Declared("nothere", "tokunseba_no_such:x")])
    got = []
    found = plugins.load(lambda facts, codec, where: got.append((facts.name, str(where))), None)
    assert [name for name, _ in got] == list(BUILTIN) and all(w == "built in" for _, w in got)
    assert found == ["protocol plugin 'nothere' (tokunseba_no_such:x) not loaded: "
                     "ModuleNotFoundError: No module named 'tokunseba_no_such'"]
    assert found[0] in plugins.problems()


def test_a_built_in_that_fails_is_raised_never_hidden(monkeypatch):
    monkeypatch.setattr(plugins, "discovered", lambda only: [Declared("anthropic", "tokunseba_no_such:x")])
    with pytest.raises(ModuleNotFoundError):
        plugins.load(lambda facts, codec, where: None, None)
