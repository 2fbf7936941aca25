"""The core: everything ``materialize`` and the command line need, and no pytest.

Its wings, each importing only those below it: ``doctor`` and ``implicit`` on top, then ``engine``,
``hub`` and ``cache``; ``_hf_compat`` is the one door to huggingface_hub's private names.
"""
