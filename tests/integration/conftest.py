"""Module-scoped fixtures shared by the integration tests (a module may define its own)."""

from collections.abc import Iterator

import pytest

from tests.fixtures.rollouts import make_service
from tests.integration.dialect_fixtures import Stack
from workbench.service import WorkbenchService


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    """The scripted reference engine and a capture proxy in front of it (the dialect SDK tests)."""
    with Stack() as running:
        yield running


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkbenchService]:
    """A workbench service on its own home, proxy served, the test-scripted engine up."""
    service = make_service(tmp_path_factory.mktemp("home"))
    yield service
    service.close()
