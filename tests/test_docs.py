"""The docs stay a reference a user can follow: every relative link and every ``docs/…#anchor`` a module cites
resolves to a file and heading (``tools/check_docs_numbers.py``), no page outgrows a read, README stays short."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _checker():
    spec = importlib.util.spec_from_file_location("check_docs_numbers", ROOT / "tools" / "check_docs_numbers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_link_and_cited_anchor_resolves():
    assert _checker().check_links() == []


def test_docs_pages_stay_readable_and_the_readme_short():
    lengths = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in (ROOT / "docs").glob("*.md")}
    assert max(lengths.values()) <= 420, lengths
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 200
