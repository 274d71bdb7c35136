"""dpbundle.release.sweep."""
