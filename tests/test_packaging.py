"""The package's metadata: one version, the license file, what pip sees."""

from __future__ import annotations

import importlib.metadata
import pathlib

import pytest

import datamove

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_the_version_has_one_source():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert importlib.metadata.version("datamove") == datamove.__version__


def test_the_license_file_is_the_declared_license():
    metadata = importlib.metadata.metadata("datamove")
    assert metadata["License-Expression"] == "Apache-2.0"
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text


def test_the_changelog_names_the_current_version():
    assert f"## [{datamove.__version__}]" in (ROOT / "CHANGELOG.md").read_text()


def test_classifiers_say_typed_and_the_python_versions():
    classifiers = importlib.metadata.metadata("datamove").get_all("Classifier")
    assert "Typing :: Typed" in classifiers
    requires = importlib.metadata.metadata("datamove")["Requires-Python"]
    assert requires == ">=3.10"
    assert (ROOT / "src" / "datamove" / "py.typed").exists()
