"""``python -m dpbundle.audit BUNDLE [--pubkey KEY] ...``: the audit alone, without the release."""
import sys

from .cli import main

sys.exit(main())
