"""The release this tree is: pyproject.toml reads it (setuptools' dynamic
version) and CHANGELOG.md's newest release heading names it."""
__version__ = "0.2.0"
