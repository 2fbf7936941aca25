"""The benchmark harness of pytest-hfsnapshot: ``python -m bench`` (see ``bench/__main__.py``).

Each workload (:mod:`bench.workloads`) does the same work three ways against the local Hub, in
fresh processes (:mod:`bench.worker`): the plugin's ``materialize``, (A) plain ``snapshot_download``
and (B) the usual hand-rolled lock-and-retry around it. Nothing here is imported by the package;
this module stays import-light because every worker imports it before huggingface_hub is set up.
"""
