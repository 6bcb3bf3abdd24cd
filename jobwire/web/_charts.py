"""Charts drawn on the server as inline SVG: no script, no style attribute (the page's
Content-Security-Policy allows none), every label escaped."""

from __future__ import annotations

from collections.abc import Sequence

from markupsafe import Markup, escape

#: Colours of the bars, one per row of a bar chart (cycled).
COLOURS = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#9d755d")


def bars(rows: Sequence[tuple[str, int]], width: int = 420) -> Markup:
    """Horizontal bars, one per ``(label, count)``, scaled to the largest count."""
    row, label_width = 22, 110
    top = max((count for _, count in rows), default=0) or 1
    height = row * len(rows) + 4
    out = [f'<svg class="chart" role="img" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">']
    span = width - label_width - 60
    for i, (label, count) in enumerate(rows):
        y = i * row + 2
        length = round(span * count / top)
        out.append(
            f'<text x="{label_width - 6}" y="{y + 15}" text-anchor="end" font-size="13">'
            f'{escape(label)}</text>'
            f'<rect x="{label_width}" y="{y + 3}" width="{length}" height="{row - 6}" '
            f'fill="{COLOURS[i % len(COLOURS)]}"><title>{escape(label)}: {count}</title></rect>'
            f'<text x="{label_width + length + 6}" y="{y + 15}" font-size="13" '
            f'data-count="{escape(label)}">{count}</text>')
    out.append("</svg>")
    return Markup("".join(out))


def histogram(labels: Sequence[str], counts: Sequence[int], width: int = 480,
              height: int = 140, least: int = 60) -> Markup:
    """Vertical bars, one per bucket, up to the last bucket with a count (at least
    ``least`` buckets); every tenth bucket labelled below, each bar titled with its count."""
    shown = max([least, *(i + 1 for i, c in enumerate(counts) if c)])
    shown = min(shown, len(counts))
    top = max(counts[:shown], default=0) or 1
    plot = height - 20
    step = width / max(shown, 1)
    out = [f'<svg class="chart" role="img" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">',
           f'<line x1="0" y1="{plot}" x2="{width}" y2="{plot}" stroke="#888"/>']
    for i in range(shown):
        bar = plot * counts[i] / top
        x = i * step
        if counts[i]:
            out.append(f'<rect x="{x:.1f}" y="{plot - bar:.1f}" width="{max(step - 1, 1):.1f}" '
                       f'height="{bar:.1f}" fill="{COLOURS[0]}"><title>{escape(labels[i])}: '
                       f'{counts[i]} jobs</title></rect>')
        if i % 10 == 0:
            out.append(f'<text x="{x:.1f}" y="{height - 4}" font-size="11">'
                       f'{escape(labels[i])}</text>')
    out.append(f'<text x="{width - 4}" y="12" text-anchor="end" font-size="11">max {top}</text>')
    out.append("</svg>")
    return Markup("".join(out))
