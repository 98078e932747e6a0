"""Named API endpoints of the page, for notebooks (`gradio_client`, `workbench.client`).

list_datasets, list_tasks, list_harnesses, list_sandboxes, run_rollout (streams progress, ends
with the result), get_rollout, list_rollouts, sessions. Results are plain JSON; the typed
models live in `workbench.client`. A refusal is a `gr.Error` whose message says what to do.
"""

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import gradio as gr
from pydantic import BaseModel

from workbench.datasets import DatasetError
from workbench.service import RunStatus, WorkbenchService
from workbench.ui.catalogues import Catalogues
from workbench.ui.run_form import FormError, rollout_request

POLL_S = 0.25
ENDPOINTS = (
    "list_datasets",
    "list_tasks",
    "list_harnesses",
    "list_sandboxes",
    "run_rollout",
    "get_rollout",
    "list_rollouts",
    "sessions",
)


def plain(obj: Any) -> Any:
    """JSON-ready form of a pydantic model or dataclass (paths become strings)."""
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json")
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _json_value(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    return _json_value(obj)


def _json_value(value: Any) -> Any:
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_json_value(v) for v in value]
    return plain(value) if isinstance(value, BaseModel) else str(value)


def redact(session_id: str) -> str:
    # A session id is the API key of its rollout on the proxy: never list it in full.
    return session_id[:7] + "…"


def progress(status: RunStatus) -> dict[str, Any]:
    counters = status.session
    return {
        "type": "status",
        "run_id": status.run_id,
        "phase": status.phase,
        "turns": counters.turns if counters else 0,
        "prompt_tokens": counters.prompt_tokens if counters else 0,
        "completion_tokens": counters.completion_tokens if counters else 0,
        "errors": counters.errors if counters else 0,
    }


def register_api(service: WorkbenchService, catalogues: Catalogues) -> None:
    """Register the endpoints on the Blocks being built (call inside its context)."""

    def list_datasets() -> list[dict]:
        """Dataset specs offered here, with their task counts (or why they cannot be opened)."""
        return [e.model_dump() for e in catalogues.datasets()]

    def list_tasks(dataset: str) -> list[dict]:
        """Tasks of a dataset spec, with their instructions and timeouts."""
        try:
            return [t.model_dump() for t in catalogues.tasks(dataset)]
        except DatasetError as exc:
            raise gr.Error(str(exc)) from exc

    def list_harnesses() -> list[dict]:
        """Harbor agents: dialects, host-side or installed, redirectable (capturable) or why not."""
        return [plain(h) for h in catalogues.harnesses()]

    def list_sandboxes() -> list[dict]:
        """Sandboxes and whether each is usable here (with the reason when not)."""
        return [plain(s) for s in catalogues.sandboxes()]

    async def run_rollout(
        dataset: str,
        task: str,
        harness: str = "terminus-2",
        sandbox: str = "local",
        engine_url: str = "",
        model: str = "",
        timeout_s: float = 0.0,
        reward_key: str = "",
    ) -> AsyncIterator[dict]:
        """Run one rollout. Yields {"type": "status", ...} as the phase and counters change, then
        {"type": "result", "result": RolloutResult}. A blank engine_url = the embedded engine."""
        try:
            request = await rollout_request(
                service,
                dataset=dataset,
                task=task,
                harness=harness,
                sandbox=sandbox,
                engine_url=engine_url,
                model=model,
                timeout_s=timeout_s,
                reward_key=reward_key,
                source="api",
            )
        except FormError as exc:
            raise gr.Error(str(exc)) from exc
        run_id = service.submit(request)
        last = None
        try:
            while (status := service.status(run_id)).state != "done" or status.result is None:
                if (update := progress(status)) != last:
                    last = update
                    yield update
                await asyncio.sleep(POLL_S)
            yield {"type": "result", "run_id": run_id, "result": plain(status.result)}
        finally:
            service.cancel(run_id)  # a caller that went away does not leave the run behind

    def get_rollout(rollout_id: str) -> dict:
        """The stored rollout document (the contract JSON)."""
        doc = service.store.get_document(rollout_id)
        if doc is None:
            raise gr.Error(f"no stored rollout {rollout_id!r}: list_rollouts shows the ids")
        return doc

    def list_rollouts(limit: int = 50) -> list[dict]:
        """Stored rollouts, newest first."""
        return [plain(r) for r in service.store.list_rollouts(limit=max(1, min(limit, 1000)))]

    def sessions() -> list[dict]:
        """Live counters of every capture session (ids redacted)."""
        out = []
        for counters in service.registry.all_counters():
            item = plain(counters)
            item["session_id"] = redact(counters.session_id)
            out.append(item)
        return out

    for fn in (list_datasets, list_tasks, list_harnesses, list_sandboxes):
        gr.api(fn, api_name=fn.__name__, concurrency_limit=None)
    gr.api(run_rollout, api_name="run_rollout", concurrency_limit=None)
    for fn in (get_rollout, list_rollouts, sessions):
        gr.api(fn, api_name=fn.__name__, concurrency_limit=None)
