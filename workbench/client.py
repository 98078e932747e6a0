"""Notebook client for a running workbench (local or a Space), over its Gradio API.

    from workbench.client import WorkbenchClient
    wb = WorkbenchClient("http://127.0.0.1:7860")
    result = wb.run("demo", wb.tasks("demo")[0].name, on_status=print)
    doc = wb.document(result.id)        # the rollout document (contract JSON), schema-checked

Every method is one named endpoint (see `workbench.ui.api`); results come back as the same
pydantic models the server uses.
"""

from collections.abc import Callable
from typing import Any, Literal

from gradio_client import Client
from pydantic import BaseModel

from capture.document import validate_document
from capture.sessions import SessionCounters
from workbench.rollout import RolloutResult
from workbench.store import RolloutRow
from workbench.ui.catalogues import DatasetEntry, TaskEntry


class RunProgress(BaseModel):
    """One progress update of `run` (sent when the phase or a counter changes)."""

    type: Literal["status"] = "status"
    run_id: str
    phase: str
    turns: int
    prompt_tokens: int
    completion_tokens: int
    errors: int


class CatalogueItem(BaseModel, extra="allow"):
    """A harness or sandbox as the server lists it (all its fields kept)."""

    name: str


class WorkbenchClient:
    """url: the app's base URL (`http://host:7860`) or a Space id (`owner/name`).
    token: a Hugging Face token for private Spaces."""

    def __init__(self, url: str, *, token: str | None = None, verbose: bool = False):
        self.url = url
        self._client = Client(url, token=token, verbose=verbose, download_files=False)

    def _call(self, endpoint: str, *args: Any, **kwargs: Any) -> Any:
        return self._client.predict(*args, api_name=f"/{endpoint}", **kwargs)

    def datasets(self) -> list[DatasetEntry]:
        return [DatasetEntry.model_validate(d) for d in self._call("list_datasets")]

    def tasks(self, dataset: str) -> list[TaskEntry]:
        return [TaskEntry.model_validate(t) for t in self._call("list_tasks", dataset)]

    def harnesses(self) -> list[CatalogueItem]:
        return [CatalogueItem.model_validate(h) for h in self._call("list_harnesses")]

    def sandboxes(self) -> list[CatalogueItem]:
        return [CatalogueItem.model_validate(s) for s in self._call("list_sandboxes")]

    def run(
        self,
        dataset: str,
        task: str,
        *,
        harness: str = "terminus-2",
        sandbox: str = "local",
        engine_url: str = "",
        model: str = "",
        timeout_s: float = 0.0,
        reward_key: str = "",
        on_status: Callable[[RunProgress], None] | None = None,
    ) -> RolloutResult:
        """Run one rollout and return its result (`ok=False` with a typed error when it failed;
        never raised). A blank engine_url = the server's embedded engine."""
        job = self._client.submit(
            dataset,
            task,
            harness,
            sandbox,
            engine_url,
            model,
            timeout_s,
            reward_key,
            api_name="/run_rollout",
        )
        final: dict[str, Any] | None = None
        for update in job:
            if update.get("type") == "result":
                final = update
            elif on_status is not None:
                on_status(RunProgress.model_validate(update))
        if final is None:  # iteration ended without a result: surface the server's error
            final = job.result()
        return RolloutResult.model_validate(final["result"])

    def document(self, rollout_id: str) -> dict[str, Any]:
        """The stored rollout document, validated against the rollout JSON schema."""
        doc = self._call("get_rollout", rollout_id)
        if problems := validate_document(doc):
            raise ValueError(f"rollout {rollout_id}: the document fails its schema: {problems}")
        return doc

    def rollouts(self, limit: int = 50) -> list[RolloutRow]:
        return [RolloutRow.model_validate(r) for r in self._call("list_rollouts", limit)]

    def sessions(self) -> list[SessionCounters]:
        """Live capture sessions (ids redacted: a session id is its rollout's API key)."""
        return [SessionCounters.model_validate(s) for s in self._call("sessions")]

    def view_api(self) -> dict[str, Any]:
        """The server's named endpoints and their parameters (gradio_client's view)."""
        return self._client.view_api(print_info=False, return_format="dict")

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> "WorkbenchClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
