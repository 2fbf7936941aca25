"""Makes the vendored tests a package, as in huggingface_hub's repository (their sdist leaves this file out)."""
