"""How numbers are printed in metrics.csv and the datasheet."""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["NUMBER_FORMAT", "NUMBER_FORMAT_DOC", "format_number"]

NUMBER_FORMAT = ".6g"
NUMBER_FORMAT_DOC = "format(x, '.6g')"


def format_number(x: Any) -> str:
    """The one documented way numbers are printed in metrics.csv and the datasheet."""
    if x is None:
        return ""
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    return format(float(x), NUMBER_FORMAT)
