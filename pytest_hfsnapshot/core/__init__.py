"""The core: what ``materialize`` and the command line need, and no pytest.

Wings, each importing only those below it: ``doctor`` and ``implicit`` on top, then ``engine``,
``hub``, ``cache``; ``_hf_compat`` is the one door to huggingface_hub's private names."""
