"""`kcsim report (--lake LAKE | --replay DIR) --out FILE.html`: one self-contained page of
plots of a run (CONTRACT §3).

The page holds plotly.js itself (inlined, no CDN), so it opens offline in any browser.
Per cluster: the health timeline (x = the events' time when every event has a `ts`, else
their seq) with the requests per event by type and the events that had unclean elections,
divergences or violations on the same axis; the first divergences, violations and
rejected events as tables; leaders and ISR memberships per broker over time (heatmaps: a
broker lost and the rebalance after it show as a row emptying and filling); then leaders
per broker at the start, the worst moment and the end. A summary table comes first. The
data and its reductions are `streaming.insight.report_data`'s.
"""

from __future__ import annotations

import argparse
import html
import json
import sys
import time
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from streaming.insight.report_data import (
    FIRST_ROWS,
    ClusterReport,
    Marks,
    ReportInputError,
    Series,
    Summary,
    cluster_report,
    clusters,
    read_lake,
    read_replay,
)
from streaming.pages import figure_html, page

# One colour per plotted thing, none shared between figures: the browser test finds each
# plot in the screenshot by its colours.
HEALTH_LINES = {
    "offline": "#d62728",
    "under_replicated": "#ff7f0e",
    "at_min_isr": "#9467bd",
    "not_preferred": "#1f77b4",
}
LIVE_BROKERS = "#2ca02c"
REQUEST_COLOURS = {
    "LeaderAndIsr": "#17becf",
    "UpdateMetadata": "#8c564b",
    "StopReplica": "#e377c2",
}
# The KRaft controller's output: its metadata records per event, by record type.
RECORD_COLOURS = {
    "PartitionChangeRecord": "#17becf",
    "PartitionRecord": "#8c564b",
    "BrokerRegistrationChangeRecord": "#e377c2",
    "RegisterBrokerRecord": "#7b4173",
    "TopicRecord": "#637939",
    "RemoveTopicRecord": "#843c39",
    "ConfigRecord": "#bd9e39",
    "ClearElrRecord": "#5254a3",
    "FeatureLevelRecord": "#6b6ecf",
    "UnregisterBrokerRecord": "#ad494a",
}
MARK_STYLES = {  # row label, colour, symbol
    "unclean": ("unclean election", "#bcbd22", "x"),
    "divergences": ("divergence", "#ff00ff", "diamond"),
    "violations": ("violation", "#8b0000", "triangle-up"),
}
# Under kraft, two more rows: the elections only a KRaft controller makes
KRAFT_MARK_STYLES = {
    "unclean": ("unclean election", "#bcbd22", "x"),
    "elr_elections": ("ELR election", "#00a087", "circle"),
    "last_known_leader_elections": ("last-known-leader election", "#f39b7f", "square"),
    "divergences": ("divergence", "#ff00ff", "diamond"),
    "violations": ("violation", "#8b0000", "triangle-up"),
}
MOMENT_COLOURS = {"start": "#4c78a8", "worst": "#e45756", "end": "#54a24b"}
# the per-broker heatmaps: white (none) to these at each one's largest count
BROKER_LEADERS = "#08306b"
BROKER_ISR = "#00441b"

# px: wide enough that a line covers a whole row of pixels in its own colour wherever
# the layout puts it (a 2 px line centred between two rows blends into both)
LINE_WIDTH = 2.5
TIMELINE_HEIGHT = 760
LEADERS_HEIGHT = 360
BROKERS_ROW_PX = 26  # a broker's row in each heatmap
# request bars stay at least this fraction of the x range wide, however sparse the events
# (a shadow's seqs are zxids: 2^8 apart and more)
MIN_BAR_FRACTION = 1 / 250

STYLE = """
body { font-family: system-ui, sans-serif; margin: 24px; color: #222; background: #fff; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 18px; margin: 28px 0 6px; }
p.note { color: #555; font-size: 13px; margin: 4px 0 10px; max-width: 1100px; }
table { border-collapse: collapse; font-size: 12px; margin: 6px 0 12px; }
th, td { border: 1px solid #ccc; padding: 2px 5px; text-align: right; }
th { background: #f3f3f3; } td { white-space: nowrap; } td.text, th.text { text-align: left; }
"""


def configure(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--lake", help="a local Delta lake (`kcsim run --lake`)")
    source.add_argument("--replay", type=Path, help="a `kcsim replay --out` directory")
    parser.add_argument("--out", type=Path, required=True, help="the HTML file to write")
    parser.add_argument("--quiet", action="store_true", help="no summary line on stderr")


def main(args: argparse.Namespace) -> int:
    started = time.monotonic()
    try:
        if args.lake is not None:
            from streaming.lake.local_reader import local_root

            root = local_root(args.lake)
            if root is None:
                raise ReportInputError(f"--lake must be a local directory, got {args.lake}")
            tables, source = read_lake(root), f"lake {args.lake}"
        else:
            tables, source = read_replay(args.replay), f"replay {args.replay}"
        reports = [cluster_report(tables, c) for c in clusters(tables)]
    except ReportInputError as error:
        print(f"kcsim report: {error}", file=sys.stderr)
        return 2
    if not reports:
        print("kcsim report: no health rows: nothing to plot", file=sys.stderr)
        return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(render_report(reports, source), encoding="utf-8")
    if not args.quiet:
        events = sum(r.summary.events for r in reports)
        print(
            f"kcsim report: {events} events of {len(reports)} cluster(s) in "
            f"{time.monotonic() - started:.2f} s -> {args.out}",
            file=sys.stderr,
        )
    return 0


# ------------------------------------------------------------------------------- page


def render_report(reports: Sequence[ClusterReport], source: str) -> str:
    parts = [
        "<h1>kcsim report</h1>",
        f'<p class="note">{html.escape(source)}; written {_now()}. '
        "x axes are the events' time (UTC) when every event of the cluster has a "
        "<code>ts</code>, else the events themselves (the cluster's seq). A run longer "
        "than 2,000 events is drawn in "
        "buckets of consecutive events, each as its minimum and maximum at the events where "
        "they occur (one-event spikes stay); marks are then counted per bucket.</p>",
        "<h2>Summary</h2>",
        summary_table([r.summary for r in reports]),
    ]
    if any(r.kraft for r in reports):
        parts.append(
            '<p class="note">Under kraft, unclean elections count the last-known-leader '
            "ones too (a leader restored from <code>last_known_elr</code> with ISR and ELR "
            "empty, RECOVERING); ELR elections picked a leader from the ELR, cleanly. A KRaft "
            "controller sends no requests: its output is the metadata records it writes.</p>"
        )
    for number, report in enumerate(reports):
        parts.append(f"<h2>Cluster {html.escape(report.cluster)}</h2>")
        bucket = (
            "every event plotted"
            if report.bucket == 1
            else f"{report.bucket} events per bucket (min and max of each)"
        )
        parts.append(f'<p class="note">{report.summary.events:,} events, {bucket}.</p>')
        parts.append(figure_html(timeline_figure(report), f"timeline-{number}"))
        parts.append(first_rows_html(report))
        if report.brokers is not None and report.brokers.brokers:
            parts.append(figure_html(brokers_figure(report), f"brokers-{number}"))
        parts.append(_moments_note(report))
        parts.append(figure_html(leaders_figure(report), f"leaders-{number}"))
    return page("kcsim report", STYLE, parts)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")


def html_table(header: Sequence[str], rows: Iterable[Sequence[object]], text_columns: int) -> str:
    """A table; the first `text_columns` columns left-aligned."""

    def cells(tag: str, values: Sequence[object]) -> str:
        return "".join(
            f"<{tag}{' class=text' if i < text_columns else ''}>{html.escape(str(v))}</{tag}>"
            for i, v in enumerate(values)
        )

    body = "".join(f"<tr>{cells('td', row)}</tr>" for row in rows)
    return f"<table><tr>{cells('th', header)}</tr>{body}</table>"


SUMMARY_HEADER = (
    "cluster",
    "events (seq)",
    "time",
    "partitions",
    "live brokers",
    "peak offline (seq)",
    "peak under-replicated",
    "peak at min ISR",
    "offline partition-events",
    "unclean elections",
    "leader changes",
    "requests",
    "divergences",
    "violations",
    "rejected",
)


KRAFT_SUMMARY_HEADER = (
    *SUMMARY_HEADER[:1],
    "engine",
    *SUMMARY_HEADER[1:10],
    "ELR elections",
    "last-known-leader elections",
    SUMMARY_HEADER[10],
    "metadata records",
    *SUMMARY_HEADER[12:],
)


def summary_table(summaries: Sequence[Summary]) -> str:
    """One row per cluster; with a KRaft cluster among them, each row also says its
    engine and its ELR and last-known-leader elections (SPEC-KRAFT §4.3), and the output
    column counts a KRaft cluster's metadata records (it sends no requests)."""
    if any(s.engine == "kraft" for s in summaries):
        kraft_rows = [
            (
                s.cluster,
                s.engine,
                f"{s.events:,} ({s.first_seq}..{s.last_seq})",
                _time_span(s.first_ts, s.last_ts),
                f"{s.partitions:,}",
                s.live_brokers,
                f"{s.peak_offline:,} ({s.peak_offline_seq})",
                f"{s.peak_under_replicated:,}",
                f"{s.peak_at_min_isr:,}",
                f"{s.offline_partition_events:,}",
                f"{s.unclean_elections:,}",
                f"{s.elr_elections:,}" if s.engine == "kraft" else "-",
                f"{s.last_known_leader_elections:,}" if s.engine == "kraft" else "-",
                f"{s.leader_changes:,}",
                f"{s.output:,}",
                f"{s.divergences:,}",
                f"{s.violations:,}",
                f"{s.rejected:,}",
            )
            for s in summaries
        ]
        header = list(KRAFT_SUMMARY_HEADER)
        if any(s.engine != "kraft" for s in summaries):  # the output column of both kinds
            header[header.index("metadata records")] = "requests (zk) or metadata records"
        return html_table(header, kraft_rows, text_columns=4)
    rows = [
        (
            s.cluster,
            f"{s.events:,} ({s.first_seq}..{s.last_seq})",
            _time_span(s.first_ts, s.last_ts),
            f"{s.partitions:,}",
            s.live_brokers,
            f"{s.peak_offline:,} ({s.peak_offline_seq})",
            f"{s.peak_under_replicated:,}",
            f"{s.peak_at_min_isr:,}",
            f"{s.offline_partition_events:,}",
            f"{s.unclean_elections:,}",
            f"{s.leader_changes:,}",
            f"{s.requests:,}",
            f"{s.divergences:,}",
            f"{s.violations:,}",
            f"{s.rejected:,}",
        )
        for s in summaries
    ]
    return html_table(SUMMARY_HEADER, rows, text_columns=3)


def _time_span(first: int | None, last: int | None) -> str:
    if first is None or last is None:
        return "-"

    start, end = (datetime.fromtimestamp(ms / 1000, UTC) for ms in (first, last))
    # the end's date only when it is another day
    end_format = "%H:%M:%S" if start.date() == end.date() else "%Y-%m-%d %H:%M:%S"
    return f"{start:%Y-%m-%d %H:%M:%S} .. {end.strftime(end_format)} UTC"


FIRST_COLUMNS = {
    "divergences": ("seq", "ts", "topic", "partition", "field", "observed", "simulated"),
    "violations": ("seq", "ts", "source", "invariant", "topic", "partition", "broker", "detail"),
    "rejected_events": ("source", "reason", "raw"),
}
FIRST_TITLES = {
    "divergences": ("divergences", "the real controller's state differs from kcsim's"),
    "violations": ("violations", "an invariant of Kafka's controller broken"),
    "rejected_events": ("rejected events", "never applied"),
}
CELL_CHARS = 120  # a longer value (a raw line, a detail) is cut, with an ellipsis


def first_rows_html(report: ClusterReport) -> str:
    """The first divergences, violations and rejected events as tables (or a line saying
    there are none)."""
    totals = {
        "divergences": report.summary.divergences,
        "violations": report.summary.violations,
        "rejected_events": report.summary.rejected,
    }
    parts = []
    none = []
    for name, columns in FIRST_COLUMNS.items():
        title, what = FIRST_TITLES[name]
        table = report.first_rows.get(name)
        if table is None or table.num_rows == 0:
            none.append(title)
            continue
        shown = min(table.num_rows, FIRST_ROWS)
        parts.append(
            f'<p class="note"><b>{title}</b> ({what}): {totals[name]:,}'
            + (f", the first {shown}" if totals[name] > shown else "")
            + "</p>"
        )
        rows = [[_cell(column, row.get(column)) for column in columns] for row in _rows(table)]
        parts.append(html_table(["time" if c == "ts" else c for c in columns], rows, 0))
    if none:
        parts.append(f'<p class="note">No {", no ".join(none)}.</p>')
    return "\n".join(parts)


def _rows(table: pa.Table) -> list[dict[str, Any]]:
    return list(table.to_pylist())


def _cell(column: str, value: object) -> str:
    if value is None:
        return "-"
    if column == "ts" and isinstance(value, int):
        return datetime.fromtimestamp(value / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 1] + "\u2026"


def _moments_note(report: ClusterReport) -> str:
    items = "; ".join(
        f"<b>{m.name}</b>: after seq {m.seq} ({html.escape(m.why)}), {m.offline} offline"
        for m in report.moments
    )
    return f'<p class="note">Leaders per broker (online partitions each leads). {items}.</p>'


# ----------------------------------------------------------------------------- figures


def _line(
    report: ClusterReport, series: Series, name: str, colour: str, stepped: bool, **extra: Any
) -> Any:
    import plotly.graph_objects as go

    return go.Scatter(
        x=report.x(series.x),
        y=series.y,
        name=name,
        mode="lines",
        line={"color": colour, "width": LINE_WIDTH, "shape": "hv" if stepped else "linear"},
        **extra,
    )


def timeline_figure(report: ClusterReport) -> Any:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    stepped = report.bucket == 1
    styles = KRAFT_MARK_STYLES if report.kraft else MARK_STYLES
    colours = RECORD_COLOURS if report.kraft else REQUEST_COLOURS
    figure = make_subplots(
        rows=4,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.05,
        row_heights=[0.40, 0.13, 0.27, 0.20] if report.kraft else [0.42, 0.14, 0.28, 0.16],
        subplot_titles=(
            "partitions",
            "live brokers (unfenced, not shutting down)" if report.kraft else "live brokers",
            "metadata records per event" if report.kraft else "requests per event",
            "elections, divergences, violations"
            if report.kraft
            else "unclean elections, divergences, violations",
        ),
    )
    for metric, colour in HEALTH_LINES.items():
        figure.add_trace(
            _line(report, report.timeline[metric], metric.replace("_", "-"), colour, stepped),
            1,
            1,
        )
    figure.add_trace(
        _line(report, report.timeline["live_brokers"], "live brokers", LIVE_BROKERS, stepped),
        2,
        1,
    )
    width = bar_width(report.x(report.seqs))
    for kind, series in report.requests.items():
        colour = colours.get(kind, "#7f7f7f")
        if stepped:
            figure.add_trace(
                go.Bar(
                    x=report.x(series.x),
                    y=series.y,
                    width=width,
                    name=kind,
                    marker={"color": colour, "line": {"width": 0}},
                ),
                3,
                1,
            )
        else:
            figure.add_trace(_line(report, series, kind, colour, stepped=False), 3, 1)
    for field, (label, colour, symbol) in styles.items():
        marks: Marks = getattr(report, field)
        figure.add_trace(
            go.Scatter(
                x=report.x(marks.x),
                y=[label] * len(marks.x),
                customdata=np.stack([marks.count, marks.x], axis=-1),
                name=f"{label} ({marks.total})",
                mode="markers",
                marker={"color": colour, "symbol": symbol, "size": 11},
                hovertemplate=(
                    f"seq %{{customdata[1]}}: %{{customdata[0]}} {label} row(s)<extra></extra>"
                ),
            ),
            4,
            1,
        )
    figure.update_yaxes(
        type="category",  # also when no trace has a mark (empty traces give no categories)
        categoryorder="array",
        categoryarray=[s[0] for s in styles.values()],
        range=[-0.5, len(styles) - 0.5],  # every row shown, marked or not
        row=4,
        col=1,
    )
    # from a little below 0: a line at 0 is drawn whole, not half cut off by the plot area
    for row, metrics in ((1, list(HEALTH_LINES)), (2, ["live_brokers"])):
        top = max(max(report.timeline[m].y.max(initial=0) for m in metrics), 1)
        figure.update_yaxes(range=[-0.03 * top, 1.05 * top], row=row, col=1)
    figure.update_xaxes(title_text=x_title(report), row=4, col=1)
    if report.times is not None:  # also the rows with no point (their type is not guessed)
        figure.update_xaxes(type="date")
    figure.update_layout(
        barmode="stack",
        height=TIMELINE_HEIGHT,
        margin={"l": 60, "r": 20, "t": 40, "b": 40},
        template="plotly_white",
        hovermode="x unified",
        legend={"traceorder": "normal"},
    )
    return figure


def leaders_figure(report: ClusterReport) -> Any:
    import plotly.graph_objects as go

    brokers = sorted({b for m in report.moments for b in m.leaders})
    categories = [f"broker {b}" for b in brokers] + ["offline"]
    figure = go.Figure()
    for moment in report.moments:
        values = [moment.leaders.get(b, 0) for b in brokers] + [moment.offline]
        figure.add_trace(
            go.Bar(
                x=categories,
                y=values,
                name=f"{moment.name} (seq {moment.seq})",
                marker={"color": MOMENT_COLOURS[moment.name]},
            )
        )
    figure.update_layout(
        title={"text": "leaders per broker", "font": {"size": 14}},
        barmode="group",
        height=LEADERS_HEIGHT,
        margin={"l": 60, "r": 20, "t": 40, "b": 40},
        template="plotly_white",
        yaxis={"title": {"text": "partitions led"}, "rangemode": "tozero"},
    )
    return figure


def x_title(report: ClusterReport) -> str:
    return "time (UTC)" if report.times is not None else "event (seq)"


def bar_width(x: np.ndarray) -> float:
    """Bars' width in x units (ms on a time axis): 80% of the closest events' distance, or
    MIN_BAR_FRACTION of the x range when events are far sparser than that, so a bar is
    never thinner than a pixel or so (plotly sizes bars by the closest two x values)."""
    values = np.unique(np.asarray(x).astype(np.int64))
    span = float(values[-1] - values[0]) if len(values) > 1 else 0.0
    if span == 0:
        return 1.0 if values.dtype.kind != "M" and len(values) else 1000.0
    closest = float(np.diff(values).min())
    return max(0.8 * closest, span * MIN_BAR_FRACTION)


def brokers_figure(report: ClusterReport) -> Any:
    """Leaders and ISR memberships per broker over time, as two heatmaps (rows: brokers)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    view = report.brokers
    assert view is not None
    names = [f"broker {b}" for b in view.brokers]
    # a cell holds from its event to the next one (the state after it): x as the cells'
    # edges, the last (the state at the end) 5% of the axis wide
    x = report.x(view.x)
    unit = np.timedelta64(1000, "ms") if x.dtype.kind == "M" else 1
    span = (x[-1] - x[0]) / 20 if len(x) > 1 and x[-1] > x[0] else unit
    x = np.append(x, x[-1] + span)
    figure = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.12,
        subplot_titles=(
            "online partitions led, per broker",
            "ISR memberships, per broker",
        ),
    )
    for row, (values, colour, label) in enumerate(
        ((view.leaders, BROKER_LEADERS, "led"), (view.isr, BROKER_ISR, "in ISR")), start=1
    ):
        figure.add_trace(
            go.Heatmap(
                x=x,
                y=names,
                z=values,
                zmin=0,
                zmax=max(int(values.max()) if values.size else 1, 1),
                colorscale=[[0.0, "#ffffff"], [1.0, colour]],
                colorbar={"title": {"text": label}, "len": 0.42, "y": 0.8 if row == 1 else 0.2},
                xgap=0,
                ygap=2,
                customdata=np.broadcast_to(view.x, values.shape),
                hovertemplate=(
                    f"%{{y}}, seq %{{customdata}}: %{{z}} partitions {label}<extra></extra>"
                ),
            ),
            row,
            1,
        )
    figure.update_xaxes(title_text=x_title(report), row=2, col=1)
    figure.update_yaxes(autorange="reversed")
    figure.update_layout(
        height=140 + 2 * BROKERS_ROW_PX * len(names) + 80,
        margin={"l": 80, "r": 20, "t": 40, "b": 40},
        template="plotly_white",
    )
    return figure
