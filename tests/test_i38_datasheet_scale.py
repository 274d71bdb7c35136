"""Issue 38: the datasheet of a registry of hundreds of millions of records. Its count axes'
labels ("400,000,000") stay inside their chart (a 331M-row release's README.pdf had the first
digits cut away, which the audit's documentation check found); charts of up to 50 million
records keep their layout (and so every bundle made before renders the same)."""
from __future__ import annotations

import re

import pytest

from dpbundle.templates.datasheet.charts import distribution_chart


def _ticks(svg: str) -> list[tuple[float, str]]:
    return [(float(x), t) for x, t in re.findall(r'<text x="([0-9.]+)" y="[0-9.]+" text-anchor="end" fill="[^"]+">([0-9,]+)</text>', svg)]


@pytest.mark.parametrize("top", [400_000_000, 1_331_000_000, 4_000_000_000, 40_000_000_000])
def test_every_count_label_of_a_wide_axis_starts_inside_the_chart(top):
    """Widths measured with DejaVu Sans' advances (the widest of the charts' fonts)."""
    counts = [top // 12 * (1 + k % 3) for k in range(12)]
    svg = distribution_chart([str(m) for m in range(1, 13)], counts, title="birth_month", edition=2)
    ticks = _ticks(svg)
    assert ticks, "no count axis labels found"
    for x, text in ticks:
        dejavu = sum((0.318 if ch == "," else 0.636) * 9 for ch in text)
        assert x - dejavu >= 1.0, (text, x)


def test_charts_up_to_fifty_million_keep_their_margin():
    counts = [50_000_000 // 12] * 12
    svg = distribution_chart([str(m) for m in range(1, 13)], counts, edition=2)
    assert all(x == 48.0 for x, _ in _ticks(svg))         # the axis at 52, its labels 4 units left
    svg = distribution_chart([str(m) for m in range(1, 13)], [300_000_000] * 12, edition=2)
    assert all(x > 48.0 for x, _ in _ticks(svg))
