"""The one door to the Hub: the gate, retries, refusals, outages, the token, offline mode.

Imports the cache wing and ``core._hf_compat``."""
