"""Benchmark harness for pytest-hfsnapshot (issue 7).

``python -m bench`` measures, in one run against the local Hub, ``materialize`` (what the plugin
calls) side by side with two baselines: (A) plain ``huggingface_hub.snapshot_download`` and
(B) the common hand-rolled approach (a file lock per repo around ``snapshot_download``, three
attempts with linear backoff, one metadata file checked). It prints a table of ratios with their
targets and writes ``bench/results/latest.json``.

Layout: :mod:`bench.hubserver` runs the local Hub in its own process, :mod:`bench.worker` is
the measured process (a fresh interpreter per worker), :mod:`bench.workloads` holds the eight
workloads and :mod:`bench.report` the table, the JSON and ``RESULTS.md``.

Nothing here is imported by the package; this module must stay import-light because every
worker process imports it before huggingface_hub is configured.
"""
