"""The committed report's figures: every figure REPORT.md and results/tables/*.md link exists, and
every file in results/figures/ is linked from one of them (no stale figure is committed).

Reads the repository's own REPORT.md and results/ (no report run); the fixture-built report's
links are checked by test_report.test_every_linked_figure_exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIGURES = ROOT / "results" / "figures"
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")


def documents() -> list[Path]:
    return [ROOT / "REPORT.md", *sorted((ROOT / "results" / "tables").glob("*.md"))]


def links() -> dict[Path, list[Path]]:
    """Each document's image links, resolved from its own folder."""
    return {
        d: [(d.parent / link).resolve() for link in IMAGE.findall(d.read_text(encoding="utf-8"))]
        for d in documents()
        if d.is_file()
    }


pytestmark = pytest.mark.skipif(not (ROOT / "REPORT.md").is_file(), reason="no committed REPORT.md")


def test_every_linked_figure_exists():
    missing = [f"{d.relative_to(ROOT)} -> {p}" for d, ps in links().items() for p in ps if not p.is_file()]
    assert not missing, missing


def test_every_figure_is_linked():
    linked = {p for ps in links().values() for p in ps}
    stale = sorted(p.name for p in FIGURES.iterdir() if p.resolve() not in linked) if FIGURES.is_dir() else []
    assert not stale, f"results/figures/ holds figures nothing links (git rm them or link them): {stale}"


def test_report_body_links_the_acceptance_figure():
    body = [p.name for p in links()[ROOT / "REPORT.md"]]
    assert "acceptance_vs_budget.png" in body
