"""`tokunseba report`: one self-contained HTML page of where turns went and what they cost.

``series`` shapes ledger rows into the page's figures (pure: rows in, numbers out); ``page``
draws them with plotly into one HTML file that fetches nothing when it is opened (plotly.js
inlined). The command itself is cli/report.py.
"""

from .page import PlotlyMissing, render
from .series import Figures, ReportInputs, budget_series, figures

__all__ = ["Figures", "ReportInputs", "budget_series", "figures", "PlotlyMissing", "render"]
