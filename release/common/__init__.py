"""dpbundle.release.common."""
