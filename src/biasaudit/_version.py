"""biasaudit's version: the package's own (``biasaudit.__version__``) and the one its
``pyproject.toml`` builds with. A foundation: every layer that records the version
(run manifests, reports, imports) reads it here, importing nothing above."""

__version__ = "0.1.0"
