"""pytest fixtures of the testing kit, registered by the plugin (no import needed in conftest)."""

from __future__ import annotations
