"""The session's Hub: every process a test starts gets what the tests get (CONTRACT section 11).

It may import the public face and the core; the plugin starts and stops it.
"""
