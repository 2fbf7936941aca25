"""Testing kit: a local Hub double with fault injection, and half-written cache states.

Everything here works without pytest; the plugin registers the ``local_hub`` fixture.
"""

from __future__ import annotations
