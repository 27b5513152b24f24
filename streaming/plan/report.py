"""`kcsim plan --report FILE.html`: one self-contained page (plotly.js inlined, no CDN):
the verdict, a per-step timeline of partitions without a leader and under min ISR (with
under-replicated ones and the controller's output on their own axes), leaders per broker
before and after, and the step table."""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence
from typing import Any

from controller.plan.planner import PlanRun, StepResult
from streaming.pages import figure_html, page
from streaming.plan.render import human_bytes, names_shown, partitions_text

COLOURS = {
    "offline": "#d62728",
    "under_min_isr": "#9467bd",
    "under_replicated": "#ff7f0e",
    "output": "#8c564b",
    "before": "#4c78a8",
    "after": "#54a24b",
}
STYLE = """
body { font-family: system-ui, sans-serif; margin: 24px; color: #222; background: #fff; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 18px; margin: 24px 0 6px; }
p.note { color: #555; font-size: 13px; margin: 4px 0 10px; max-width: 1200px; }
p.safe { color: #1a7f37; font-weight: 600; } p.unsafe { color: #b42318; font-weight: 600; }
table { border-collapse: collapse; font-size: 12px; margin: 6px 0 12px; }
th, td { border: 1px solid #ccc; padding: 2px 5px; text-align: right; }
th { background: #f3f3f3; } td.text, th.text { text-align: left; }
tr.unsafe td { background: #fde8e8; }
pre { font-size: 12px; background: #f7f7f7; padding: 8px; max-width: 1200px;
      white-space: pre-wrap; }
"""
TABLE_ROWS = 400  # steps listed in the page's table (the plots have them all)


def render_plan(run: PlanRun, doc: dict[str, Any]) -> str:
    verdict_class = "safe" if run.safe else "unsafe"
    parts = [
        "<h1>kcsim plan</h1>",
        f'<p class="note">cluster {html.escape(run.cluster)}, {partitions_text(run)}, '
        f"engine {html.escape(run.engine)}; state {html.escape(doc['state'])}; steps "
        f"{html.escape(doc['steps_spec'])}; {len(run.steps):,} steps planned in "
        f"{run.seconds:.1f} s.</p>",
        f'<p class="{verdict_class}">{html.escape(doc["summary"])} (exit {doc["exit_status"]})</p>',
    ]
    proposal = doc.get("proposal")
    if proposal is not None:
        parts.append("<h2>Proposal</h2>")
        parts.append(f"<pre>{html.escape(chr(10).join(proposal['text']))}</pre>")
        verified = proposal.get("verified")
        if verified is not None:
            parts.append(
                f'<p class="note">The proposal planned again through the controller: '
                f"{verified['verdict']}.</p>"
            )
    parts.append("<h2>Per step</h2>")
    parts.append(
        '<p class="note">x: steps (0 = the state before the first). Without a leader and '
        "under min.insync.replicas: the partitions in that condition at any moment of the "
        f"step. The controller's {run.output_kind}: the bytes sent during the step (the table "
        "below has their count too). The dotted line marks the worst step.</p>"
    )
    parts.append(figure_html(timeline_figure(run), "plan-timeline"))
    parts.append(figure_html(leaders_figure(run), "plan-leaders"))
    parts.append("<h2>Steps</h2>")
    parts.append(steps_table(run))
    return page("kcsim plan", STYLE, parts)


def timeline_figure(run: PlanRun) -> Any:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    steps = [run.before, *run.steps]
    x = [s.index for s in steps]
    labels = [s.label for s in steps]
    figure = make_subplots(
        rows=3,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.06,
        row_heights=[0.5, 0.25, 0.25],
        subplot_titles=(
            "partitions without a leader / under min.insync.replicas",
            "under-replicated partitions",
            f"controller's {run.output_kind} (bytes)",
        ),
    )

    def line(values: list[int], name: str, colour: str, row: int, width: int = 2) -> None:
        figure.add_trace(
            go.Scatter(
                x=x,
                y=values,
                name=name,
                mode="lines+markers",
                # a step's value held for its width, centred on it as the bars are
                line={"color": colour, "shape": "hvh", "width": width},
                marker={"size": 5},
                text=labels,
                hovertemplate="step %{x}: %{text}<br>%{y:,}<extra>" + name + "</extra>",
            ),
            row=row,
            col=1,
        )

    # (under min ISR first and wider: a line without a leader on top stays visible)
    line([len(s.under_min_isr) for s in steps], "under min ISR", COLOURS["under_min_isr"], 1, 5)
    line([len(s.offline) for s in steps], "without a leader", COLOURS["offline"], 1)
    line([s.under_replicated for s in steps], "under-replicated", COLOURS["under_replicated"], 2)
    figure.add_trace(
        go.Bar(
            x=x,
            y=[s.output_bytes for s in steps],
            name=f"{run.output_kind} bytes",
            marker={"color": COLOURS["output"]},
            hovertext=labels,
            hovertemplate="step %{x}: %{hovertext}<br>%{y:,} bytes<extra></extra>",
        ),
        row=3,
        col=1,
    )
    worst = run.worst
    if worst is not None and worst.unsafe:
        figure.add_vline(
            x=worst.index,
            line={"color": "#b42318", "dash": "dot"},
            annotation_text=f"worst: {worst.label}",
            annotation_position="top right",
            row=1,
            col=1,
        )
    figure.update_layout(
        height=640,
        margin={"l": 60, "r": 20, "t": 70, "b": 40},
        template="plotly_white",
        legend={"orientation": "h", "y": 1.12},
    )
    figure.update_yaxes(rangemode="tozero")
    # whole partitions: ticks at least 1 apart
    top = max([len(s.offline) + len(s.under_min_isr) for s in steps] + [1])
    figure.update_yaxes(dtick=max(1, math.ceil(top / 6)), row=1, col=1)
    top = max([s.under_replicated for s in steps] + [1])
    figure.update_yaxes(dtick=max(1, math.ceil(top / 4)), row=2, col=1)
    figure.update_xaxes(title_text="step", row=3, col=1)
    return figure


def leaders_figure(run: PlanRun) -> Any:
    import plotly.graph_objects as go

    brokers = sorted(set(run.leaders_before) | set(run.leaders_after))
    categories = [f"broker {b}" for b in brokers] + ["no leader"]
    figure = go.Figure()
    last = run.steps[-1] if run.steps else run.before
    for name, leaders, offline in (
        ("before", run.leaders_before, len(run.before.offline)),
        ("after", run.leaders_after, _offline_at_end(run, last)),
    ):
        figure.add_trace(
            go.Bar(
                x=categories,
                y=[leaders.get(b, 0) for b in brokers] + [offline],
                name=name,
                marker={"color": COLOURS[name]},
            )
        )
    figure.update_layout(
        title={"text": "leaders per broker, before and after", "font": {"size": 14}},
        barmode="group",
        height=340,
        margin={"l": 60, "r": 20, "t": 40, "b": 40},
        template="plotly_white",
        yaxis={"title": {"text": "partitions led"}, "rangemode": "tozero"},
    )
    # whole partitions: ticks at least 1 apart
    top = max([*run.leaders_before.values(), *run.leaders_after.values(), 1])
    figure.update_yaxes(dtick=max(1, math.ceil(top / 6)))
    return figure


def _offline_at_end(run: PlanRun, last: StepResult) -> int:
    led = sum(run.leaders_after.values())
    return max(run.partitions_after - led, 0)


def steps_table(run: PlanRun) -> str:
    header = (
        "step", "action", "without a leader", "under min ISR", "under-replicated",
        "leader moves", "not preferred", run.output_kind, "bytes", "partitions named",
    )  # fmt: skip
    rows = []
    for step in [run.before, *run.steps][: TABLE_ROWS + 1]:
        named = _named(step)
        rows.append(
            (
                step.unsafe,
                (
                    step.index,
                    step.label,
                    len(step.offline),
                    len(step.under_min_isr),
                    step.under_replicated,
                    step.leader_moves,
                    step.not_preferred,
                    f"{step.output_count:,}",
                    human_bytes(step.output_bytes),
                    named,
                ),
            )
        )
    more = len(run.steps) + 1 - len(rows)
    note = f'<p class="note">{more:,} more steps in --json.</p>' if more > 0 else ""
    return _html_table(header, rows, {1, 9}) + note


def _named(step: StepResult, most: int = 12) -> str:
    """The partitions without a leader and those under min ISR, each group labelled (a
    partition can be in both: RF 1 with min ISR 2)."""
    groups = []
    for label, names in (("no leader", step.offline), ("under min ISR", step.under_min_isr)):
        if names:
            groups.append(f"{label}: {names_shown(names, most)}")
    return "; ".join(groups)


def _html_table(
    header: Sequence[str], rows: Iterable[tuple[bool, Sequence[object]]], text: set[int]
) -> str:
    def cells(tag: str, values: Sequence[object]) -> str:
        return "".join(
            f"<{tag}{' class=text' if i in text else ''}>{html.escape(str(v))}</{tag}>"
            for i, v in enumerate(values)
        )

    body = "".join(
        f"<tr{' class=unsafe' if unsafe else ''}>{cells('td', row)}</tr>" for unsafe, row in rows
    )
    return f"<table><tr>{cells('th', header)}</tr>{body}</table>"
