"""The steps of ``materialize`` and the prefetch: resolve, list, fetch, verify, record.

Imports the hub and cache wings."""
