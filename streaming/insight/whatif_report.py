"""`kcsim whatif --report FILE.html`: the runs' timelines on one page, one colour per run,
after the totals and the differing leaders (the same text the command prints)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from streaming.insight.report import STYLE
from streaming.insight.report_data import ClusterReport
from streaming.pages import figure_html, page

RUN_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf")
PANELS = (
    ("offline", "offline partitions"),
    ("under_replicated", "under-replicated partitions"),
    ("not_preferred", "partitions not led by their preferred replica"),
    # a ZooKeeper-mode controller sends requests, a KRaft one writes metadata records
    ("output", "controller output per event: requests (zk) or metadata records (kraft)"),
)


def render_whatif(
    labels: Sequence[str],
    runs: Sequence[Sequence[ClusterReport]],
    totals: str,
    differences: str,
    by_type: str = "",
) -> str:
    parts = [
        "<h1>kcsim whatif</h1>",
        '<p class="note">The same events under each run\'s settings. x axes are events '
        "(seq); long runs are drawn as each bucket's minimum and maximum.</p>",
        f"<h2>Totals</h2><pre>{html.escape(totals)}</pre>",
        f"<h2>Final leaders</h2><pre>{html.escape(differences)}</pre>",
    ]
    if by_type:
        parts.append(
            "<h2>By event type</h2>"
            '<p class="note">Each event is charged with what followed it until the next: '
            "the partitions left offline that long, its leader changes and elections. "
            "Types whose charges differ between runs come first.</p>"
            f"<pre>{html.escape(by_type)}</pre>"
        )
    names = sorted({r.cluster for reports in runs for r in reports})
    for number, cluster in enumerate(names):
        per_run = [next((r for r in reports if r.cluster == cluster), None) for reports in runs]
        parts.append(f"<h2>Cluster {html.escape(cluster)}</h2>")
        parts.append(figure_html(runs_figure(labels, per_run), f"whatif-{number}"))
    return page("kcsim whatif", STYLE, parts)


def runs_figure(labels: Sequence[str], reports: Sequence[ClusterReport | None]) -> Any:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    figure = make_subplots(
        rows=len(PANELS),
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.06,
        subplot_titles=[title for _, title in PANELS],
    )
    for n, (label, report) in enumerate(zip(labels, reports, strict=True)):
        if report is None:
            continue
        colour = RUN_COLOURS[n % len(RUN_COLOURS)]
        for row, (metric, _) in enumerate(PANELS, start=1):
            series = report.timeline[metric]
            figure.add_trace(
                go.Scatter(
                    x=series.x,
                    y=series.y,
                    name=f"run {n}: {label}",
                    legendgroup=str(n),
                    showlegend=row == 1,
                    mode="lines",
                    line={"color": colour, "width": 2, "shape": "hv"},
                ),
                row,
                1,
            )
    figure.update_xaxes(title_text="event (seq)", row=len(PANELS), col=1)
    figure.update_layout(
        height=220 * len(PANELS),
        margin={"l": 60, "r": 20, "t": 40, "b": 40},
        template="plotly_white",
        hovermode="x unified",
        legend={"orientation": "h", "y": 1.08},
    )
    return figure
