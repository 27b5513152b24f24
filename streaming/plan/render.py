"""A plan's result as JSON (`--json`) and as a table for the terminal."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from controller.plan.planner import PlanRun, StepResult

# the terminal shows every step of a plan up to this long; a longer one its first and last
# steps, every unsafe step among the first shown, and the worst (all of them in --json)
SHOWN_STEPS = 60
HEAD, TAIL = 25, 10
NAMES_SHOWN = 8


def document(
    run: PlanRun,
    state: str,
    steps: str,
    status: int,
    proposal: dict[str, Any] | None,
    notes: Sequence[str],
) -> dict[str, Any]:
    worst = run.worst
    return {
        "cluster": run.cluster,
        "engine": run.engine,
        "state": state,
        "state_notes": list(notes),
        "steps_spec": steps,
        "partitions": run.partitions,
        "partitions_after": run.partitions_after,
        "output_kind": run.output_kind,
        "verdict": "safe" if run.safe else "unsafe",
        "exit_status": status,
        "summary": verdict_text(run),
        "before": run.before.as_json(),
        "steps": [s.as_json() for s in run.steps],
        "worst_step": None if worst is None else worst.as_json(states=False),
        "leaders_before": {str(b): n for b, n in run.leaders_before.items()},
        "leaders_after": {str(b): n for b, n in run.leaders_after.items()},
        "replicas_after": {str(b): n for b, n in run.replicas_after.items()},
        "seconds": round(run.seconds, 3),
        "proposal": proposal,
    }


def partitions_text(run: PlanRun) -> str:
    """How many partitions the state holds, and how many the steps leave when that differs
    (a topic deletion waiting for a dead replica finishes when its broker returns)."""
    text = f"{run.partitions:,} partitions"
    if run.partitions_after != run.partitions:
        text += f" ({run.partitions_after:,} after the steps)"
    return text


def verdict_text(run: PlanRun) -> str:
    worst = run.worst
    if worst is None:
        return "safe: the plan has no steps"
    unsafe = [s for s in run.steps if s.unsafe]
    if not unsafe:
        return "safe: every partition stays led and at or above min.insync.replicas through " + (
            "its one step" if len(run.steps) == 1 else f"all {len(run.steps)} steps"
        )
    parts = []
    if worst.offline:
        parts.append(f"{len(worst.offline)} without a leader ({names_shown(worst.offline)})")
    if worst.under_min_isr:
        under = worst.under_min_isr
        parts.append(f"{len(under)} under min.insync.replicas ({names_shown(under)})")
    leave = "leaves" if len(unsafe) == 1 else "leave"
    return (
        f"unsafe: {len(unsafe)} of {len(run.steps)} steps {leave} partitions without a leader "
        f"or under min.insync.replicas; the worst, step {worst.index} ({worst.label}), leaves "
        + " and ".join(parts)
    )


def names_shown(names: Sequence[str], most: int = NAMES_SHOWN) -> str:
    """The first `most` names, and how many more there are."""
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def human_bytes(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{size} B"


def _row(step: StepResult) -> list[str]:
    return [
        str(step.index),
        step.label,
        str(len(step.offline)),
        str(len(step.under_min_isr)),
        str(step.under_replicated),
        str(step.leader_moves),
        str(step.not_preferred),
        f"{step.output_count:,}",
        human_bytes(step.output_bytes),
        "UNSAFE" if step.unsafe else "",
    ]


def shown_steps(steps: Sequence[StepResult], worst: StepResult | None) -> list[StepResult | None]:
    """The steps the terminal shows, None where some are left out."""
    if len(steps) <= SHOWN_STEPS:
        return list(steps)
    keep = {s.index for s in steps[:HEAD]} | {s.index for s in steps[-TAIL:]}
    if worst is not None:
        keep.add(worst.index)
    out: list[StepResult | None] = []
    for step in steps:
        if step.index in keep:
            out.append(step)
        elif out and out[-1] is not None:
            out.append(None)
    return out


def terminal_text(run: PlanRun, doc: dict[str, Any]) -> str:
    output = run.output_kind
    header = [
        "step", "action", "offline", "<min ISR", "URP", "leader moves", "not preferred",
        output, f"{output} bytes", "",
    ]  # fmt: skip
    rows: list[list[str]] = [_row(run.before)]
    rows[0][-1] = "UNSAFE" if run.before.unsafe else ""
    rows[0][5] = rows[0][7] = rows[0][8] = ""
    left_out = 0
    for step in shown_steps(run.steps, run.worst):
        if step is None:
            rows.append(["...", "", "", "", "", "", "", "", "", ""])
        else:
            rows.append(_row(step))
    left_out = len(run.steps) - sum(1 for r in rows[1:] if r[0] != "...")
    lines = [
        f"kcsim plan: cluster {run.cluster}, {partitions_text(run)}, engine "
        f"{run.engine}; state {doc['state']}; steps {doc['steps_spec']}",
    ]
    lines += [f"  ({note})" for note in doc["state_notes"]]
    lines.append("")
    lines.append(_table(header, rows))
    if left_out:
        lines.append(f"({left_out:,} steps not shown; --json has them all)")
    for step in run.steps:
        for note in step.notes:
            lines.append(f"note: step {step.index} ({step.label}): {note}")
    lines.append("")
    worst = run.worst
    if worst is not None and worst.unsafe:
        lines.append(f"worst step: {worst.index} ({worst.label})")
        if worst.offline:
            lines.append(f"  without a leader: {names_shown(worst.offline)}")
        if worst.under_min_isr:
            lines.append(f"  under min.insync.replicas: {names_shown(worst.under_min_isr)}")
    lines.append(f"verdict: {doc['summary']} (exit {doc['exit_status']})")
    proposal = doc.get("proposal")
    if proposal is not None:
        lines.append("")
        lines.append("proposal:")
        lines += [f"  {line}" for line in proposal["text"]]
        verified = proposal.get("verified")
        if verified is not None:
            lines.append(
                f"  planned again through the controller: {verified['verdict']} "
                f"({verified['seconds']:.1f} s; search {proposal['search_seconds']:.3f} s)"
            )
    lines.append("")
    lines.append(f"planned in {run.seconds:.1f} s")
    return "\n".join(lines)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    cells = [list(header), *rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    right = {0, 2, 3, 4, 5, 6, 7, 8}
    out = []
    for row in cells:
        out.append(
            "  ".join(
                (v.rjust(w) if i in right else v.ljust(w))
                for i, (v, w) in enumerate(zip(row, widths, strict=True))
            ).rstrip()
        )
    return "\n".join(out)
