"""The package imports, and its version is the Cargo workspace's."""

import pathlib
import re

import spate

ROOT = pathlib.Path(__file__).resolve().parents[2]


def workspace_version() -> str:
    """`version` of `[workspace.package]` in the root Cargo.toml (tomllib needs 3.11)."""
    text = (ROOT / "Cargo.toml").read_text()
    section = re.search(r"^\[workspace\.package\]\n(.*?)(?=^\[)", text, re.M | re.S)
    assert section, "Cargo.toml has no [workspace.package] section"
    version = re.search(r'^version\s*=\s*"([^"]+)"', section.group(1), re.M)
    assert version, "[workspace.package] has no version"
    return version.group(1)


def test_version_is_the_workspace_version():
    assert spate.__version__ == workspace_version()


def test_native_module_is_inside_the_package():
    assert spate._native.__name__ == "spate._native"
