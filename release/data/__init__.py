"""dpbundle.release.data."""
