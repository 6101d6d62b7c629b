"""One version, said the same everywhere a user reads it: the package's
``__version__``, the installed distribution's metadata (pyproject.toml reads
the version from nurec_ops/_version.py) and CHANGELOG.md's newest release."""
import importlib.metadata
import os
import re

import pytest

import nurec_ops

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_version_is_semver():
    assert re.fullmatch(r"\d+\.\d+\.\d+", nurec_ops.__version__), nurec_ops.__version__


def test_installed_metadata_matches():
    try:
        installed = importlib.metadata.version("nurec_ops")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("nurec_ops is imported from the tree, not installed")
    assert installed == nurec_ops.__version__


def test_changelog_names_this_release_first():
    with open(os.path.join(ROOT, "CHANGELOG.md")) as f:
        releases = re.findall(r"^## \[(\d+\.\d+\.\d+)\]", f.read(), flags=re.M)
    assert releases, "CHANGELOG.md has no release heading"
    assert releases[0] == nurec_ops.__version__
