"""Moved to :mod:`dpbundle.templates.datasheet.charts` (the datasheet is rendered from a
bundle's public files by code that the audit shares); this name stays for compatibility."""
from dpbundle.templates.datasheet.charts import *  # noqa: F401,F403
from dpbundle.templates.datasheet.charts import NOISE_Z, criteria_chart, distribution_chart  # noqa: F401
