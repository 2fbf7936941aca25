"""The session endpoint: the Hub's HTTP API on loopback for every process a test starts (CONTRACT section 11).

It may import the public face and the core, never pytest; the plugin starts one per process that runs tests.
"""

from __future__ import annotations

from .environ import ChildEnvironment
from .server import DirectConnection, SessionEndpoint

__all__ = ["ChildEnvironment", "DirectConnection", "SessionEndpoint"]
