"""portcheck: find and fix what ties PyTorch code to CUDA, per target accelerator."""

# The one place the version is written (pyproject.toml reads it): a literal, because looking
# it up in the installed metadata costs every run, pre-commit's included, a noticeable start-up.
__version__ = "0.1.0"
