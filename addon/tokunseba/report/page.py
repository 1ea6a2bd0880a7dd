"""The report as one self-contained HTML page: plotly draws the charts, and its JavaScript is
inlined in the page, so opening the file fetches nothing (no CDN, no font, no image).

``render(figures, title) -> str``. plotly is imported here only (`pip install tokunseba[report]`);
without it the command says how to get it.
"""

from __future__ import annotations

import datetime as dt
import html
from decimal import Decimal
from typing import Any

from .series import Figures


class PlotlyMissing(Exception):
    """plotly is not installed."""


def _plotly() -> Any:
    try:
        import plotly.graph_objects as go
    except ImportError:
        raise PlotlyMissing("tokunseba report draws its charts with plotly: pip install 'tokunseba[report]' "
                            "(or .venv/bin/pip install plotly)") from None
    return go


def _money(v: Decimal) -> str:
    return f"${v:,.4f}"


# one colour per side in every chart: local endpoints green, providers blue, unknown grey
SIDE_COLOURS = {"local": "#2ca02c", "providers": "#1f77b4", "unknown": "#999999"}
PROVIDER_SHADES = ("#1f77b4", "#4a90c8", "#7aaed8", "#08519c", "#6baed6")
LOCAL_SHADES = ("#2ca02c", "#74c476", "#006d2c", "#a1d99b")


def _spend_chart(go: Any, f: Figures) -> Any:
    fig = go.Figure()
    n_local = n_provider = 0
    for where, by_day in f.spend.items():
        if where in f.local_places:
            colour, n_local = LOCAL_SHADES[n_local % len(LOCAL_SHADES)], n_local + 1
        else:
            colour, n_provider = PROVIDER_SHADES[n_provider % len(PROVIDER_SHADES)], n_provider + 1
        fig.add_bar(name=where, x=f.days, y=[float(by_day.get(d, 0)) for d in f.days], marker_color=colour)
    fig.update_layout(barmode="stack", title="Spend per day and endpoint (reported usage × price)",
                      yaxis_title="USD", xaxis_title="day", legend_title="served by")
    return fig


def _share_chart(go: Any, f: Figures) -> Any:
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, specs=[[{"type": "domain"}, {"type": "domain"}]],
                        subplot_titles=("turns served", "tokens reported"))
    for col, (name, by_side) in enumerate((("turns", f.turns_by_side), ("tokens", f.tokens_by_side)), 1):
        fig.add_pie(labels=list(by_side), values=list(by_side.values()), row=1, col=col, hole=0.4, name=name,
                    sort=False, marker_colors=[SIDE_COLOURS[s] for s in by_side])
    fig.update_layout(title="Served locally versus by providers")
    return fig


def _budget_chart(go: Any, f: Figures) -> Any | None:
    if not f.budgets:
        return None
    fig = go.Figure()
    for b in f.budgets:
        pts = b.get("points") or []
        when = dt.datetime.fromtimestamp(b["window_start"], dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        unit = "$" if b.get("unit") == "usd" else "tokens "
        fig.add_scatter(name=f"{b['name']} from {when} (limit {unit}{b.get('limit')})", mode="lines+markers",
                        x=[dt.datetime.fromtimestamp(p[0], dt.timezone.utc) for p in pts], y=[float(p[1]) for p in pts])
    fig.update_layout(title="Each budget's use over its window", yaxis_title="spent", xaxis_title="time (UTC)")
    return fig


def render(f: Figures, title: str = "tokunseba report") -> str:
    go = _plotly()
    charts = [c for c in (_spend_chart(go, f), _share_chart(go, f), _budget_chart(go, f)) if c is not None]
    parts = []
    for i, c in enumerate(charts):  # plotly.js once, inlined with the first chart
        parts.append(c.to_html(full_html=False, include_plotlyjs=(i == 0), config={"displaylogo": False}))
    facts = (f"{f.turns} turns, {f.served} served; priced {f.priced}, unpriced {f.unpriced} (no price known: not "
             f"counted as 0), no usage reported {f.no_usage}; total {_money(f.total)}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            "<style>body{font-family:sans-serif;margin:2em} .facts{color:#444}</style></head><body>"
            f"<h1>{html.escape(title)}</h1><p class='facts'>{html.escape(facts)}</p>"
            + "".join(f"<div class='chart'>{p}</div>" for p in parts) + "</body></html>")
