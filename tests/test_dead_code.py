"""No dead code in ``readers/``, ``tasks/`` and ``bastion/``: vulture at 80% confidence finds
nothing that tests/vulture_whitelist.py does not explain (issue 44)."""

from __future__ import annotations

from pathlib import Path

import pytest
from vulture import Vulture  # the test extra's (pyproject.toml)

ROOT = Path(__file__).resolve().parent.parent
WHITELIST = Path(__file__).resolve().parent / "vulture_whitelist.py"


def unused(paths: list[Path]) -> list[str]:
    v = Vulture()
    v.scavenge([str(p) for p in paths])
    return [f"{Path(item.filename).relative_to(ROOT)}:{item.first_lineno}: {item.message}"
            for item in v.get_unused_code(min_confidence=80)]


@pytest.mark.slow  # (≈ 1.5 s: every module parsed)
def test_vulture_finds_no_dead_code() -> None:
    found = unused([ROOT / "readers", ROOT / "tasks", ROOT / "bastion", WHITELIST])
    assert found == [], "dead code (remove it, or explain it in tests/vulture_whitelist.py):\n" \
        + "\n".join(found)


def test_vulture_sees_an_unused_variable() -> None:
    """The check itself: without the whitelist, the context managers' ``*exc`` is found."""
    found = unused([ROOT / "tasks" / "progress.py"])
    assert any("unused variable 'exc'" in line for line in found), found
