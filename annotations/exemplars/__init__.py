"""Few-shot exemplars of the Interactive-T2S agent: authoring, review, versioned sets, import and export.

``services`` writes, ``selectors`` reads (``exemplars_for_version`` is what the
agent's session layer calls), ``lint`` checks an exemplar against its database,
``importer`` reads the paper authors' prompt folders and our JSON export.
"""
