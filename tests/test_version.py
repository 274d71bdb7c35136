"""``import dpbundle`` gives the installed version and loads nothing heavy."""
from __future__ import annotations

import importlib.metadata
import subprocess
import sys


def test_dpbundle_has_its_version():
    import dpbundle

    assert dpbundle.__version__ == importlib.metadata.version("dpbundle")


def test_importing_dpbundle_is_light():
    code = ("import sys, dpbundle; heavy = [m for m in ('numpy', 'pandas', 'jsonschema', 'opendp', 'weasyprint') "
            "if m in sys.modules]; print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ""
