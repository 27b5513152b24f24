"""Self-contained HTML pages of plotly figures, shared by `kcsim report`, `kcsim whatif
--report` and `kcsim plan --report`.

plotly.js is inlined once per page (no CDN), so a page opens offline and can be attached
to a ticket or a CI run as one file; each figure is a `<div>` that uses it.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import Any


def page(title: str, style: str, parts: Iterable[str]) -> str:
    """A whole HTML document: `style` as its stylesheet, then `parts` in order."""
    from plotly.offline import get_plotlyjs

    body = "\n".join(parts)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{style}</style>"
        f'<script type="text/javascript">{get_plotlyjs()}</script>'
        f"</head><body>\n{body}\n</body></html>\n"
    )


def figure_html(figure: Any, div_id: str) -> str:
    """One figure as a `<div id=div_id>`, drawn by the page's plotly.js."""
    return str(
        figure.to_html(
            full_html=False,
            include_plotlyjs=False,
            div_id=div_id,
            config={"displaylogo": False, "responsive": True},
        )
    )
