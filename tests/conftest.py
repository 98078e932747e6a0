"""Shared test configuration.

With WORKBENCH_REQUIRE_ALL=1 (set by .ci/run) every skip becomes a failure: a test that needs a
missing tool (bwrap, tmux, Chromium) must not pass silently in CI. Skips raised while a module is
collected (a module-level `pytest.skip`, `importorskip`) count too.
"""

import os

import pytest

REQUIRE_ALL = os.environ.get("WORKBENCH_REQUIRE_ALL") == "1"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if REQUIRE_ALL and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"skipped under WORKBENCH_REQUIRE_ALL=1: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    report = outcome.get_result()
    if REQUIRE_ALL and report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"{collector.nodeid} skipped under WORKBENCH_REQUIRE_ALL=1: {reason}"
