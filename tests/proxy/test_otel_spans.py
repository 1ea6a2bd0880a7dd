"""The span exporter's settings: which collector (the option, else the standard variables,
none when OTEL_SDK_DISABLED=true), a URL that is not a collector's refused in one line (run:
exit 2; the addon: an error and no spans), and run's options reaching the addon.
(The spans themselves: tests/e2e/test_otel_e2e.py, through a real proxy and receiver.)"""

from __future__ import annotations

import logging

import pytest

from tokunseba.cli.main import main
from tokunseba.addresses import collector_problem as endpoint_problem
from tokunseba.proxy.otel_spans import collector_named, from_settings


def test_the_collector_is_the_option_else_the_standard_variables(monkeypatch):
    for v in ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_SDK_DISABLED"):
        monkeypatch.delenv(v, raising=False)
    assert collector_named("") is None and from_settings("") is None
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")
    assert collector_named("") == "http://collector:4318"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://traces:4318/v1/traces")
    assert collector_named("") == "http://traces:4318/v1/traces"
    assert collector_named("http://mine:4318") == "http://mine:4318"
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert collector_named("http://mine:4318") is None


@pytest.mark.parametrize("url, ok", [("http://127.0.0.1:4318", True), ("https://otel.example/v1/traces", True),
                                     ("foo", False), ("127.0.0.1:4318", False), ("grpc://h:4317", False),
                                     ("http://h:99999", False), ("http://", False)])
def test_a_url_that_is_not_a_collectors_is_one_line(url, ok):
    problem = endpoint_problem(url)
    assert (problem is None) == ok and (ok or "\n" not in problem)


def test_the_addon_sends_no_spans_to_a_bad_url_and_says_why(caplog, monkeypatch):
    monkeypatch.delenv("OTEL_SDK_DISABLED", raising=False)
    with caplog.at_level(logging.ERROR, logger="tokunseba"):
        assert from_settings("collector:4318") is None
    assert "no spans: 'collector:4318' is not an http:// or https:// URL" in caplog.text


def test_run_passes_the_span_options_and_refuses_a_bad_endpoint(capsys):
    assert main(["run", "--otlp-endpoint", "http://127.0.0.1:4318", "--otlp-bodies", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "tokunseba_otlp_endpoint=http://127.0.0.1:4318" in out and "tokunseba_otlp_bodies=true" in out
    assert main(["run", "--otlp-endpoint", "localhost:4318", "--dry-run"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("error: --otlp-endpoint: 'localhost:4318' is not an http:// or https:// URL")
