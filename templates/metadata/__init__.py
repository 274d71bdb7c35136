"""Public metadata documents rendered from a bundle's public files: ``datapackage.json``
(:mod:`.datapackage`), ``registry-entry.yaml`` (:mod:`.registry_entry`) and the statements of
``budget.json`` (:mod:`.budget_words`).

Shared by the release, which writes them, and the audit, which renders them again from the
bundle and requires the same bytes (docs/audit.md, "The closure rule"). Nothing here imports
``dpbundle.release``: every input is a public file's content or a fact the manifest signs.
"""
