"""dpbundle.release.scheme."""
