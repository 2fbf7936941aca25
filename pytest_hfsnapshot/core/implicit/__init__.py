"""Hub use nobody declared: what library code loads by repo id, seen, managed and recorded.

Imports the engine, hub and cache wings."""
