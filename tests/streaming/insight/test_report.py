"""`kcsim report` end to end: a replay of examples/events and a local Delta lake of the
same rows give the same report data, and the page renders in a real browser (headless
Chromium, from Debian's packages: scripts/install.sh) with its plots drawn by plotly.js
and no script error."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from streaming.cli import main
from streaming.insight import report_data as rd
from streaming.insight.report import (
    BROKER_ISR,
    BROKER_LEADERS,
    HEALTH_LINES,
    KRAFT_MARK_STYLES,
    LIVE_BROKERS,
    MOMENT_COLOURS,
    RECORD_COLOURS,
    REQUEST_COLOURS,
)
from tests.support.corpus import KRAFT_CORPUS

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "events"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
WINDOW = (1280, 2600)
PLOT_AREA_RIGHT = 1000  # px: the plots' data areas end left of this; legends are right of it


@pytest.fixture(scope="module")
def replay_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("replay")
    # the examples hold no bad line (examples/bad does): status 0, as the README's
    # `kcsim replay ... && kcsim report ...` needs
    assert main(["replay", str(EXAMPLES), "--out", str(out), "--quiet"]) == 0
    return out


@pytest.fixture(scope="module")
def page(replay_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("page") / "report.html"
    assert main(["report", "--replay", str(replay_dir), "--out", str(out), "--quiet"]) == 0
    return out


def test_page_is_self_contained(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert "<h2>Summary</h2>" in text
    assert text.index("<h2>Summary</h2>") < text.index("<h2>Cluster default</h2>")
    assert "<h2>Cluster shadow</h2>" in text
    # plotly.js is inlined: no script is fetched from anywhere
    assert not re.search(r"<script[^>]+src=", text)
    assert "Plotly.newPlot" in text and len(text) > 3_000_000


def test_report_of_examples(replay_dir: Path) -> None:
    tables = rd.read_replay(replay_dir)
    assert rd.clusters(tables) == ["default", "shadow"]
    shadow = rd.cluster_report(tables, "shadow")
    assert shadow.summary.divergences == 2 and shadow.divergences.x.tolist() == [4]
    default = rd.cluster_report(tables, "default")
    assert default.summary.events == 28
    # requests per event add up to the health table's and to controller_requests' rows
    per_event = sum(s.y.sum() for s in default.requests.values())
    assert per_event == default.summary.requests
    assert per_event == rd.of_cluster(tables["controller_requests"], "default").num_rows
    end = default.moments[-1]
    states = rd.of_cluster(tables["partition_state"], "default").to_pylist()
    online = [r for r in states if r["state"] == rd.ONLINE]
    assert sum(end.leaders.values()) == len(online)
    for broker, count in end.leaders.items():
        assert count == sum(1 for r in online if r["leader"] == broker)


def test_lake_and_replay_give_the_same_report(replay_dir: Path, tmp_path: Path) -> None:
    """A real Delta lake of the same rows (written with deltalake), read natively."""
    from deltalake import write_deltalake

    from streaming.lake.spark_schemas import arrow_schema

    replay_tables = rd.read_replay(replay_dir)
    for name in rd.COLUMNS:
        # (pyarrow's JSON reader reads no map: clusters' configs, which no report reads)
        full = pa.schema([f for f in arrow_schema(name) if not pa.types.is_map(f.type)])
        rows = rd.read_jsonl(replay_dir / f"{name}.jsonl", full)
        write_deltalake(str(tmp_path / name), rows)
    lake_tables = rd.read_lake(str(tmp_path))
    for cluster in ("default", "shadow"):
        lake = rd.cluster_report(lake_tables, cluster)
        replay = rd.cluster_report(replay_tables, cluster)
        assert lake.summary == replay.summary
        assert lake.moments == replay.moments
    out = tmp_path / "lake.html"
    assert main(["report", "--lake", str(tmp_path), "--out", str(out), "--quiet"]) == 0
    assert "<h2>Cluster shadow</h2>" in out.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def kraft_replay_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("kraft-replay")
    args = ["replay", str(KRAFT_CORPUS), "--out", str(out), "--quiet", "--engine", "kraft"]
    assert main(args) == 1  # the corpus holds bad lines
    return out


@pytest.fixture(scope="module")
def kraft_page(kraft_replay_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("kraft-page") / "report.html"
    assert main(["report", "--replay", str(kraft_replay_dir), "--out", str(out), "--quiet"]) == 0
    return out


def test_a_kraft_report_counts_records_and_the_kraft_elections(kraft_replay_dir: Path) -> None:
    """Under kraft the output stream is metadata_records (CONTRACT §5), and the elections
    health counts are marked per event: ELR ones, last-known-leader ones (SPEC-KRAFT
    §4.3), and the other unclean ones (`unclean_elections` holds both kinds)."""
    import json

    tables = rd.read_replay(kraft_replay_dir)
    report = rd.cluster_report(tables, "default")
    s = report.summary
    assert report.kraft and s.engine == "kraft" and s.requests == 0
    records = rd.of_cluster(tables["metadata_records"], "default")
    assert s.records == s.output == records.num_rows > 100
    assert set(report.requests) == set(records.column("type").to_pylist())
    assert sum(series.y.sum() for series in report.requests.values()) == s.records
    assert report.timeline["output"].y.sum() == s.records  # what whatif compares
    health = [
        row
        for line in (kraft_replay_dir / "health.jsonl").read_text().splitlines()
        if (row := json.loads(line))["cluster"] == "default"
    ]

    def grew(counter: str) -> list[int]:
        before = [0] + [r[counter] for r in health[:-1]]
        return [r["seq"] for r, b in zip(health, before, strict=True) if r[counter] > b]

    assert report.elr_elections.x.tolist() == grew("elr_elections") != []
    assert report.elr_elections.total == s.elr_elections == health[-1]["elr_elections"]
    lkl = report.last_known_leader_elections
    assert lkl.x.tolist() == grew("last_known_leader_elections") != []
    assert lkl.total == s.last_known_leader_elections == health[-1]["last_known_leader_elections"]
    assert report.unclean.total == s.unclean_elections - s.last_known_leader_elections > 0
    # a zk cluster's report is as before: no ELR marks, requests as its output
    zk = rd.cluster_report({**tables, "clusters": rd.schema("clusters").empty_table()}, "default")
    assert zk.summary.engine == "zk" and zk.elr_elections.total == 0


def test_a_kraft_page_names_what_the_kraft_controller_does(kraft_page: Path) -> None:
    text = kraft_page.read_text(encoding="utf-8")
    header = text[text.index("<h2>Summary</h2>") : text.index("<h2>Cluster default</h2>")]
    for column in ("engine", "ELR elections", "last-known-leader elections", "metadata records"):
        assert f">{column}" in header, column
    assert "<td class=text>kraft</td>" in header
    assert "metadata records per event" in text and "requests per event" not in text
    assert "ELR election (" in text and "last-known-leader election (" in text


def test_missing_input_is_a_usage_error(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    assert main(["report", "--replay", str(tmp_path / "none"), "--out", str(out)]) == 2
    assert main(["report", "--lake", str(tmp_path / "none"), "--out", str(out)]) == 2
    assert not out.exists()


# ----------------------------------------------------------------------------- browser


@dataclass(frozen=True, slots=True)
class Rendered:
    screenshot: np.ndarray  # height x width x 3
    dom: str
    script_errors: list[str]


@pytest.fixture(scope="module")
def chromium() -> Iterator[str]:
    # no skip: the browser test is the only proof the page draws its plots
    if CHROMIUM is None:
        pytest.fail("chromium is not installed: scripts/install.sh installs it (as root)")
    yield CHROMIUM


def render(chromium: str, page: Path, work: Path) -> Rendered:
    from PIL import Image

    common = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={work / 'profile'}",
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=10000",  # let the page's scripts finish before the capture
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
    ]
    shot = work / "shot.png"
    taken = subprocess.run(
        [*common, f"--screenshot={shot}", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    dumped = subprocess.run(
        [*common, "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    errors = [
        line
        for line in (taken.stderr + dumped.stderr).splitlines()
        if "Uncaught" in line or (":CONSOLE" in line and "rror" in line)
    ]
    with Image.open(shot) as image:
        pixels = np.asarray(image.convert("RGB"))
    return Rendered(pixels, dumped.stdout, errors)


def colour_rows(pixels: np.ndarray, colour: str, tolerance: int = 6) -> np.ndarray:
    """The y of every pixel of `colour` (#rrggbb), give or take `tolerance` per channel."""
    wanted = np.array([int(colour[i : i + 2], 16) for i in (1, 3, 5)])
    close = np.all(np.abs(pixels.astype(np.int16) - wanted) <= tolerance, axis=2)
    return np.nonzero(close)[0]


@pytest.mark.browser
def test_page_renders_its_plots_in_chromium(chromium: str, page: Path, tmp_path: Path) -> None:
    rendered = render(chromium, page, tmp_path)
    assert rendered.script_errors == []
    # plotly.js built every figure: the graph divs became plots with SVG traces
    for graph in ("timeline-0", "leaders-0", "timeline-1", "leaders-1"):
        div = re.search(rf'<div[^>]*id="{graph}"[^>]*>', rendered.dom)
        assert div is not None and "js-plotly-plot" in div.group(0), graph
    assert rendered.dom.count('class="main-svg"') >= 8
    assert rendered.dom.count("trace scatter") >= 2 * 4 and "trace bars" in rendered.dom
    # the screenshot shows them: each series of the first cluster in its own colour
    pixels = rendered.screenshot
    assert pixels.shape[:2] == (WINDOW[1], WINDOW[0])
    timeline = [HEALTH_LINES["offline"], HEALTH_LINES["under_replicated"], LIVE_BROKERS]
    timeline += list(REQUEST_COLOURS.values())
    leaders = list(MOMENT_COLOURS.values())
    plots = pixels[:, :PLOT_AREA_RIGHT]  # not the legends (on the right): the data drawn
    found = {c: colour_rows(plots, c) for c in timeline + leaders}
    for colour, rows in found.items():
        assert len(rows) >= 40, f"{colour}: {len(rows)} pixels"
    # the first cluster's leaders figure is below its timeline
    assert min(found[c].min() for c in leaders) > max(found[c].min() for c in timeline)
    # between them, leaders and ISR memberships per broker over time: each heatmap's
    # fullest cell is drawn in its own colour
    for graph in ("brokers-0", "brokers-1"):
        div = re.search(rf'<div[^>]*id="{graph}"[^>]*>', rendered.dom)
        assert div is not None and "js-plotly-plot" in div.group(0), graph
    heat = {c: colour_rows(plots, c, tolerance=2) for c in (BROKER_LEADERS, BROKER_ISR)}
    for colour, rows in heat.items():
        assert len(rows) >= 200, f"{colour}: {len(rows)} pixels"
        assert (
            max(found[c].min() for c in timeline)
            < rows.min()
            < found[MOMENT_COLOURS["start"]].min()
        )
    # the first divergences are listed (the shadow cluster of the examples has two)
    assert "<b>divergences</b>" in rendered.dom and "leader_epoch" in rendered.dom
    # not blank: the page is mostly white, and far from only
    white = np.all(pixels >= 250, axis=2).mean()
    assert 0.3 < white < 0.97
    assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 200


@pytest.mark.browser
def test_a_kraft_page_renders_records_and_elections(
    chromium: str, kraft_page: Path, tmp_path: Path
) -> None:
    rendered = render(chromium, kraft_page, tmp_path)
    assert rendered.script_errors == []
    plots = rendered.screenshot[:, :PLOT_AREA_RIGHT]
    drawn = [
        RECORD_COLOURS["PartitionChangeRecord"],
        RECORD_COLOURS["BrokerRegistrationChangeRecord"],
        KRAFT_MARK_STYLES["elr_elections"][1],
        KRAFT_MARK_STYLES["last_known_leader_elections"][1],
    ]
    for colour in drawn:
        assert len(colour_rows(plots, colour)) >= 20, colour


@pytest.mark.browser
def test_render_reports_a_script_error(chromium: str, tmp_path: Path) -> None:
    """The check above can fail: a page whose script throws is caught."""
    broken = tmp_path / "broken.html"
    broken.write_text("<html><body><script>notDefinedAnywhere();</script></body></html>")
    rendered = render(chromium, broken, tmp_path)
    assert any("notDefinedAnywhere" in line for line in rendered.script_errors)


@pytest.mark.browser
def test_request_bars_show_when_seqs_are_zxids(chromium: str, tmp_path: Path) -> None:
    """A shadow's seqs are zxids shifted by 8 bits: events of one transaction 1 apart,
    transactions thousands apart. Plotly sizes bars by the closest two x values, so they
    were drawn a fraction of a pixel wide: the request panel looked empty."""
    events = tmp_path / "events"
    events.mkdir()
    lines = [
        {"type": "broker_startup", "broker": 1, "seq": 0x4C00},
        {"type": "broker_startup", "broker": 2, "seq": 0x4C01},
        {"type": "topic_creation", "topic": "t", "assignment": {"0": [1, 2], "1": [2, 1]},
         "seq": 0x4C02},
        {"type": "broker_failure", "broker": 2, "seq": 0x6900},
        {"type": "broker_startup", "broker": 2, "seq": 0x9A00},
    ]  # fmt: skip
    (events / "shadow-1.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines))
    replayed, out = tmp_path / "replay", tmp_path / "report.html"
    assert main(["replay", str(events), "--out", str(replayed), "--quiet"]) == 0
    assert main(["report", "--replay", str(replayed), "--out", str(out), "--quiet"]) == 0
    rendered = render(chromium, out, tmp_path)
    assert rendered.script_errors == []
    plots = rendered.screenshot[:, :PLOT_AREA_RIGHT]
    for kind in ("LeaderAndIsr", "UpdateMetadata"):  # (1 px wide before: a hairline)
        assert widest_run(plots, REQUEST_COLOURS[kind]) >= 3, kind


def widest_run(pixels: np.ndarray, colour: str, tolerance: int = 6) -> int:
    """The most pixels of `colour` side by side in one row: a bar's drawn width."""
    wanted = np.array([int(colour[i : i + 2], 16) for i in (1, 3, 5)])
    close = np.all(np.abs(pixels.astype(np.int16) - wanted) <= tolerance, axis=2)
    best = 0
    for row in close[close.any(axis=1)]:
        edges = np.diff(np.concatenate(([0], row.astype(np.int8), [0])))
        starts, ends = np.nonzero(edges == 1)[0], np.nonzero(edges == -1)[0]
        best = max(best, int((ends - starts).max()))
    return best
