"""Testing kit: a local Hub with fault injection, and half-written cache states; no pytest needed."""

from __future__ import annotations
