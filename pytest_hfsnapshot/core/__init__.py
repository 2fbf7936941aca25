"""The core: everything ``materialize`` and the command line need, and no pytest.

Dependencies run one way: the pytest plugin (:mod:`pytest_hfsnapshot.plugin`) and the testing kit
(:mod:`pytest_hfsnapshot.testing`) use the core; the core uses the public face
(``errors``, ``snapshot``, ``request``, ``settings``), huggingface_hub and filelock.
"""
