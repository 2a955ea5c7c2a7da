"""Suite-wide checks.

After every test that used ``tmp_path``, each bastion output directory left there (tagged with
bastion's ``CACHEDIR.TAG``) is validated against the JSON Schemas in ``schemas/``
(tests/schemacheck.py): every record and summary the suite writes must hold.  A test that
writes a damaged output on purpose marks itself ``@pytest.mark.damaged_output``.
"""

from __future__ import annotations

import os
import time

import pytest

try:
    import jsonschema  # noqa: F401 — a test extra; required in CI
except ImportError:  # pragma: no cover — outside CI without the test extra
    if os.environ.get("CI"):
        raise
    jsonschema = None

CHECK_SECONDS: list[float] = []  # what the check cost, test by test
CHECKED: list[int] = [0]  # output directories validated


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "damaged_output: the test leaves an output that breaks the record schemas "
        "on purpose (its outputs are not validated)")


@pytest.fixture(autouse=True)
def _outputs_follow_the_schemas(request: pytest.FixtureRequest):
    if (jsonschema is None or "tmp_path" not in request.fixturenames
            or request.node.get_closest_marker("damaged_output")):
        yield
        return
    tmp = request.getfixturevalue("tmp_path")  # now, so that it is torn down after this
    yield
    from tests.schemacheck import find_outputs, validate_output

    t0 = time.monotonic()
    outputs = find_outputs(tmp)
    problems = [p for out in outputs for p in validate_output(out)]
    CHECK_SECONDS.append(time.monotonic() - t0)
    CHECKED[0] += len(outputs)
    if problems:
        pytest.fail("outputs that break the record schemas (schemas/):\n  "
                    + "\n  ".join(problems[:20]), pytrace=False)


def pytest_terminal_summary(terminalreporter) -> None:
    if CHECK_SECONDS:
        terminalreporter.write_line(
            f"record schemas: {CHECKED[0]} output directories validated after "
            f"{len(CHECK_SECONDS)} tests in {sum(CHECK_SECONDS):.2f} s")
