"""dpbundle.release.bundle."""
