"""The cache on disk: layout, records, locks, verification, layers, pins, usage.

Imports only the face and ``core._hf_compat``."""
