"""Moved to :mod:`dpbundle.templates.datasheet.value_noise`; this name stays for compatibility."""
from dpbundle.templates.datasheet.value_noise import *  # noqa: F401,F403
from dpbundle.templates.datasheet.value_noise import (DRAWS, ON_FIT, ON_SCORES, ON_VALUE,  # noqa: F401
                                                      estimate, noise_on, value_noise_rows,
                                                      value_noise_text)
