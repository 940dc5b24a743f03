"""The README and docs/ link only inside the repository, and every link and anchor they use exists.

A user reads them on a fresh clone: a link to a file beside the clone (`../shared/...`) or to a heading
that moved (docs/cli.md was split into a guide, the reference and a benchmarks page) is a dead end.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation but `-` and `_` dropped, spaces to `-`."""
    found = set()
    in_code = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        title = line.lstrip("#").strip().lower()
        found.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return found


def links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return [m.group(1) for m in LINK.finditer(text)]


def test_every_relative_link_and_anchor_resolves():
    broken = []
    for page in PAGES:
        for target in links(page):
            if re.match(r"[a-z]+://", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"{page.name}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert not broken


def test_no_page_points_outside_the_repository():
    outside = []
    for page in PAGES:
        for target in links(page):
            dest = (page.parent / target.partition("#")[0]).resolve()
            if not re.match(r"[a-z]+://", target) and ROOT not in (dest, *dest.parents):
                outside.append(f"{page.name}: {target}")
    # The README's own prose, too: the layout once pointed at ../shared/DESIGN.md (the test data beside the
    # clone, ../shared/data/, is named as what it is: optional data, not documentation).
    outside += [m.group(0) for m in re.finditer(r"\.\./\S*\.md", (ROOT / "README.md").read_text(encoding="utf-8"))]
    assert not outside


def test_the_docs_have_a_guide_a_reference_and_a_benchmarks_page():
    guide = (ROOT / "docs" / "guide.md").read_text(encoding="utf-8")
    for task in ("## Profile a script", "## Find the bottleneck", "## Compare two runs", "## Gate CI on speed",
                 "## Many ranks", "## NPU data"):
        assert task in guide
    reference = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert "## Errors and exit codes" in reference
    # Measurements live on the benchmarks page, not in the reference.
    assert "benchmarks/compare_verdicts.py --pairs" not in reference and "PSS every 50 ms" not in reference
    assert "benchmarks/compare_verdicts.py --pairs" in (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
