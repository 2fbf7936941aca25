"""The compatibility tier: other libraries' test files, unmodified, against the local Hub in every mode (run.py)."""
