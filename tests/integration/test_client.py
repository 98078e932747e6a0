"""WorkbenchClient over gradio_client against the real app: named endpoints, catalogues, a demo
rollout with progress, the same document shape as the app's store; and the example notebook."""

import json
from pathlib import Path

import pytest
from gradio_client.exceptions import AppError

from capture.document import validate_document
from capture.types import SCHEMA_ID
from tests.live_app import LiveApp
from workbench.client import RunProgress, WorkbenchClient
from workbench.ui.api import ENDPOINTS

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "examples" / "notebook.ipynb"


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    with LiveApp(tmp_path_factory.mktemp("wb-home")) as app:
        yield app


@pytest.fixture(scope="module")
def wb(live):
    with WorkbenchClient(live.url) as client:
        yield client


def test_view_api_lists_every_named_endpoint(wb):
    named = wb.view_api()["named_endpoints"]
    assert {f"/{name}" for name in ENDPOINTS} <= set(named)
    params = [p["parameter_name"] for p in named["/run_rollout"]["parameters"]]
    assert params[:4] == ["dataset", "task", "harness", "sandbox"]


def test_catalogues_are_typed_and_offer_the_embedded_defaults(wb):
    demo = next(d for d in wb.datasets() if d.spec == "demo")
    assert demo.error is None and demo.tasks > 0
    tasks = wb.tasks("demo")
    assert len(tasks) == demo.tasks and all(t.instruction for t in tasks)
    assert any(h.name == "terminus-2" and h.redirectable for h in wb.harnesses())
    assert any(s.name == "local" for s in wb.sandboxes())


def test_refusals_are_clear_errors(wb):
    with pytest.raises(AppError, match="no stored rollout 'nope'"):
        wb.document("nope")
    with pytest.raises(AppError, match="engine url must be http"):
        wb.run("demo", "anything", engine_url="ftp://engine")
    with pytest.raises(AppError, match="dataset"):
        wb.tasks("/no/such/dataset")


@pytest.mark.slow
def test_demo_rollout_through_the_client_returns_the_stored_document(wb):
    task = wb.tasks("demo")[0].name
    progress: list[RunProgress] = []
    result = wb.run("demo", task, harness="terminus-2", sandbox="local", on_status=progress.append)
    assert result.ok, result.error
    assert result.reward == 1.0 and result.tier == "tokens" and result.turns > 0
    assert progress and progress[-1].turns <= result.turns
    assert len({p.phase for p in progress}) >= 2

    doc = wb.document(result.id)
    validate_document(doc)
    assert doc["schema"] == SCHEMA_ID
    assert set(doc) == set(result.document)
    assert len(doc["turns"]) == len(result.document["turns"]) == result.turns
    assert wb.rollouts(limit=5)[0].id == result.id
    assert all(s.session_id.endswith("…") for s in wb.sessions())


@pytest.mark.slow
def test_example_notebook_runs_against_the_live_app(live, monkeypatch):
    """Executes the notebook's code cells in order in one namespace (no Jupyter needed)."""
    monkeypatch.setenv("WORKBENCH_APP_URL", live.url)
    notebook = json.loads(NOTEBOOK.read_text())
    namespace: dict = {"__name__": "__notebook__"}
    cells = [c for c in notebook["cells"] if c["cell_type"] == "code"]
    assert cells
    for i, cell in enumerate(cells):
        code = "".join(cell["source"])
        exec(compile(code, f"{NOTEBOOK.name}[cell {i}]", "exec"), namespace)
    assert namespace["result"].ok
    assert namespace["doc"]["schema"] == SCHEMA_ID
    assert namespace["entries"] and namespace["sequences"]
