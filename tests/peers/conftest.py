"""The peer suite (``suite/``) is data: the driver copies it into a pytester folder and runs it there."""

collect_ignore = ["suite"]
