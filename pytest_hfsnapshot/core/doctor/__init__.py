"""A whole cache checked, repaired and pruned (``pytest-hfsnapshot doctor``).

Imports the engine, hub and cache wings."""
