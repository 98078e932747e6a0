"""From what a user picked (UI form or API call) to a RolloutRequest, with clear refusals."""

import asyncio

from pydantic import ValidationError

from capture.engines import EngineRef
from workbench.rollout import RolloutRequest
from workbench.service import EMBEDDED, WorkbenchService


class FormError(ValueError):
    """A pick that cannot become a rollout; the message says what to change."""


async def engine_ref(service: WorkbenchService, url: str | None, model: str | None) -> EngineRef:
    """The engine to use: a blank URL (or "embedded") means the embedded reference engine,
    started on first use."""
    url = (url or "").strip()
    if not url or url == EMBEDDED:
        try:
            return await asyncio.to_thread(service.start_embedded_engine)
        except Exception as exc:
            raise FormError(f"the embedded engine cannot start ({exc}): use an engine URL") from exc
    try:
        ref = EngineRef(url=url, model=(model or "").strip() or None)
    except ValidationError as exc:
        raise FormError(exc.errors()[0]["msg"].removeprefix("Value error, ")) from exc
    if refusal := service.engine_refusal(ref):
        raise FormError(refusal)  # before any probe: a public server calls only allowed hosts
    return ref


async def rollout_request(
    service: WorkbenchService,
    *,
    dataset: str | None,
    task: str | None,
    harness: str | None,
    sandbox: str | None,
    engine_url: str | None,
    model: str | None,
    timeout_s: float | None = None,
    reward_key: str | None = None,
    source: str,
) -> RolloutRequest:
    """The request for a form's picks (UI or API; `source` labels it). The engine is resolved
    (and the embedded one started) only once every pick is there."""
    missing = [
        name
        for name, value in (
            ("dataset", dataset),
            ("task", task),
            ("harness", harness),
            ("sandbox", sandbox),
        )
        if not value
    ]
    if missing:
        raise FormError(f"choose a {' and a '.join(missing)} first")
    engine = await engine_ref(service, engine_url, model)
    try:
        return RolloutRequest(
            dataset=dataset,
            task=task,
            harness=harness,
            sandbox=sandbox,
            engine=engine,
            timeout_s=timeout_s or None,
            reward_key=(reward_key or "").strip() or None,
            labels={"source": source},
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise FormError(f"{where}: {first['msg']}") from exc
