"""Cross-check tier: download tests run against LocalHub and against olah (see conftest.py)."""
