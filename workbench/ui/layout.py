"""The workbench page: pick engine, dataset, task, harness and sandbox; Run; watch it live; inspect
the result, the rollout graph and every token; download the document; reopen past rollouts.

Rollouts run in the service (`submit`), never in a Gradio worker: a `gr.Timer` polls their status
every second, so the page stays live and a closed tab does not stop a run.
"""

import time
from datetime import datetime
from pathlib import Path
from typing import Any

import gradio as gr

from workbench.datasets import DatasetError
from workbench.service import RunStatus, WorkbenchService
from workbench.settings import Settings
from workbench.store import RolloutRow
from workbench.ui import panels
from workbench.ui.api import register_api
from workbench.ui.catalogues import Catalogues
from workbench.ui.graph_view import graph_figure, turn_choices
from workbench.ui.option_select import option_select
from workbench.ui.pickers import (
    DEFAULT_HARNESS,
    DEFAULT_SANDBOX,
    default_choice,
    harness_options,
    sandbox_options,
    task_choices,
)
from workbench.ui.run_form import FormError, engine_ref, rollout_request
from workbench.ui.token_text import TokenTexts
from workbench.ui.tokens_view import empty_tokens, render_tokens, token_window

HISTORY_HEADERS = [
    "rollout",
    "finished",
    "task",
    "harness",
    "sandbox",
    "outcome",
    "reward",
    "turns",
]
TICK_S = 1.0
# The sampled tokens end the view; a long prompt would hide them below the fold.
SCROLL_TO_SAMPLED = """
const jump = () => {
  const body = element.querySelector('.wb-tokens-body');
  const first = element.querySelector('.wb-tk-s');
  if (body && first) body.scrollTop = Math.max(0, first.offsetTop - body.offsetTop - 120);
};
jump();
watch('value', jump);
"""


def history_rows(rows: list[RolloutRow]) -> list[list[Any]]:
    return [
        [
            r.id,
            datetime.fromtimestamp(r.created_at).strftime("%Y-%m-%d %H:%M:%S"),
            r.task,
            r.harness,
            r.sandbox,
            "ok" if r.ok else (r.error_kind or "not ok"),
            "—" if r.reward is None else f"{r.reward:g}",
            r.turns,
        ]
        for r in rows
    ]


def default_turn(doc: dict[str, Any]) -> Any:
    """The first live agent turn (what a reader wants first), else the first turn."""
    turns = doc.get("turns") or []
    live_agent = [t for t in turns if t.get("role") == "agent" and not t.get("discarded")]
    chosen = (live_agent or turns or [None])[0]
    return None if chosen is None else chosen["id"]


class WorkbenchPage:
    """Builds the Blocks and holds the handlers (closures over the service would be harder to
    read and to name in the API docs)."""

    def __init__(self, service: WorkbenchService, settings: Settings, catalogues: Catalogues):
        self.service = service
        self.settings = settings
        self.catalogues = catalogues
        self.texts = TokenTexts()

    # -- building ------------------------------------------------------------------------------

    def build(self) -> gr.Blocks:
        with gr.Blocks(title="Harbor Workbench", analytics_enabled=False) as blocks:
            self._header()
            with gr.Row(equal_height=False):
                with gr.Column(scale=2, min_width=340, variant="panel"):
                    self._pickers()
                with gr.Column(scale=3, min_width=420):
                    with gr.Column(variant="panel"):
                        gr.Markdown("### Live")
                        self.live = gr.HTML(panels.idle_html(), elem_id="wb-live")
                    with gr.Column(variant="panel"):
                        gr.Markdown("### Result")
                        self.result = gr.HTML(panels.empty_result_html(), elem_id="wb-result")
                    with gr.Column(variant="panel"):
                        gr.Markdown("### Rollout graph")
                        self.graph = gr.Plot(show_label=False, elem_id="wb-graph")
                        gr.Markdown(
                            "One node per model call, depth left to right, one lane per root. "
                            "Blue: agent · amber: aux · ◆ fork · red ring: drift · faded: "
                            "discarded retry. Hover a node for its tokens and finish reason.",
                            elem_classes="wb-muted",
                        )
            self._inspector()
            self._history()
            self.run_id = gr.State(None)
            self.doc = gr.State(None)
            self.timer = gr.Timer(TICK_S, active=False)
            self._wire(blocks)
            register_api(self.service, self.catalogues)
        return blocks

    def _header(self) -> None:
        with gr.Row(elem_classes="wb-header"):
            gr.HTML(
                '<div class="wb-header"><div><h1>⚓ Harbor Workbench</h1><p>Run a Harbor task '
                "with any harness against your engine; get every model call's token ids, "
                "logprobs and the reward.</p></div></div>"
            )
            if self.settings.space_id:
                gr.DuplicateButton("Duplicate this Space", size="sm", scale=0)

    def _pickers(self) -> None:
        url_mode = bool(self.settings.engine_url)
        self.engine_mode = gr.Radio(
            [("embedded reference engine", "embedded"), ("engine URL", "url")],
            value="url" if url_mode else "embedded",
            label="Engine",
            elem_id="wb-engine-mode",
        )
        with gr.Row():
            self.engine_url = gr.Textbox(
                value=self.settings.engine_url or "",
                label="Engine URL",
                placeholder="http://gpu-host:8000",
                visible=url_mode,
                scale=3,
                elem_id="wb-engine-url",
            )
            self.engine_model = gr.Textbox(
                label="Model", placeholder="served model (optional)", visible=url_mode, scale=2
            )
        with gr.Row(equal_height=False):
            self.probe = gr.Button(
                "Probe engine", size="sm", scale=0, min_width=120, elem_id="wb-probe"
            )
            self.probe_out = gr.HTML(
                '<span class="wb-muted">measures the tier: token ids + logprobs?</span>',
                elem_id="wb-probe-out",
            )
        entries = self.catalogues.datasets()
        first = next((e.spec for e in entries if e.error is None), None)
        self.dataset = gr.Dropdown(
            [(f"{e.name} · {e.tasks} tasks" if not e.error else e.spec, e.spec) for e in entries],
            value=first,
            label="Dataset",
            info="a dataset spec: demo, a task directory, a registry.json, a git or HF repo",
            allow_custom_value=True,
            elem_id="wb-dataset",
        )
        tasks, instruction = self._tasks_of(first)
        self.task = gr.Dropdown(
            tasks, value=tasks[0][1] if tasks else None, label="Task", elem_id="wb-task"
        )
        self.instruction = gr.Textbox(
            instruction,
            label="Instruction",
            lines=3,
            max_lines=8,
            interactive=False,
            elem_id="wb-instruction",
        )
        harnesses = harness_options(self.catalogues.harnesses())
        self.harness = option_select(
            harnesses,
            value=default_choice(harnesses, DEFAULT_HARNESS),
            label="Harness",
            note="grouped by the dialect it speaks; only harnesses the proxy can redirect",
            elem_id="wb-harness",
        )
        sandboxes = sandbox_options(self.catalogues.sandboxes())
        self.sandbox = option_select(
            sandboxes,
            value=default_choice(sandboxes, DEFAULT_SANDBOX),
            label="Sandbox",
            note="greyed-out sandboxes are not usable here; the reason is shown beside them",
            elem_id="wb-sandbox",
        )
        self.timeout = gr.Number(
            0,
            label="Timeout (s)",
            info="0: the task's agent + verifier timeouts plus two minutes",
            minimum=0,
            elem_id="wb-timeout",
        )
        with gr.Row():
            self.run = gr.Button("Run", variant="primary", elem_id="wb-run")
            self.cancel = gr.Button(
                "Cancel", variant="stop", interactive=False, elem_id="wb-cancel"
            )

    def _inspector(self) -> None:
        with gr.Column(variant="panel"):
            with gr.Row(equal_height=True):
                self.turn = gr.Dropdown([], label="Turn", scale=3, elem_id="wb-turn")
                with gr.Column(scale=1, min_width=220):
                    self.full_prompt = gr.Checkbox(False, label="Show the full prompt")
                    self.download = gr.DownloadButton(
                        "Download document",
                        value=None,
                        interactive=False,
                        size="md",
                        elem_id="wb-download",
                    )
            self.tokens = gr.HTML(
                empty_tokens("Run a rollout or open one from the history to see its tokens."),
                js_on_load=SCROLL_TO_SAMPLED,
                elem_id="wb-tokens",
            )

    def _history(self) -> None:
        with gr.Accordion("History", open=True):
            with gr.Row():
                gr.Markdown("Stored rollouts, newest first. Click a row to reopen it.")
                self.refresh = gr.Button("Refresh", size="sm", scale=0, elem_id="wb-refresh")
            self.history = gr.Dataframe(
                history_rows(self.service.store.list_rollouts(limit=100)),
                headers=HISTORY_HEADERS,
                type="array",
                interactive=False,
                elem_id="wb-history",
            )

    # -- wiring --------------------------------------------------------------------------------

    def _wire(self, blocks: gr.Blocks) -> None:
        quiet = {"show_progress": "hidden", "api_visibility": "private"}
        self.engine_mode.change(
            self.on_engine_mode, self.engine_mode, [self.engine_url, self.engine_model], **quiet
        )
        self.probe.click(
            self.on_probe,
            [self.engine_mode, self.engine_url, self.engine_model],
            self.probe_out,
            api_visibility="private",
        )
        self.dataset.change(self.on_dataset, self.dataset, [self.task, self.instruction], **quiet)
        self.task.change(self.on_task, [self.dataset, self.task], self.instruction, **quiet)
        self.run.click(
            self.on_run,
            [
                self.engine_mode,
                self.engine_url,
                self.engine_model,
                self.dataset,
                self.task,
                self.harness,
                self.sandbox,
                self.timeout,
            ],
            [self.run_id, self.timer, self.live, self.result, self.run, self.cancel],
            api_visibility="private",
        )
        self.cancel.click(self.on_cancel, self.run_id, self.cancel, **quiet)
        self.timer.tick(
            self.on_tick,
            self.run_id,
            [self.live, self.timer, self.run, self.cancel, self.history, *self._doc_outputs()],
            concurrency_limit=None,
            **quiet,
        )
        # `.input`, not `.change`: showing a new document sets the turn itself (and its tokens).
        for control in (self.turn, self.full_prompt):
            control.input(
                self.on_turn,
                [self.doc, self.turn, self.full_prompt],
                self.tokens,
                concurrency_limit=None,
                **quiet,
            )
        self.history.select(self.on_history_select, None, self._doc_outputs(), **quiet)
        self.refresh.click(self.on_refresh, None, self.history, **quiet)
        blocks.load(self.on_refresh, None, self.history, **quiet)

    def _doc_outputs(self) -> list[Any]:
        return [self.doc, self.result, self.graph, self.turn, self.tokens, self.download]

    # -- handlers ------------------------------------------------------------------------------

    def on_engine_mode(self, mode: str) -> tuple[Any, Any]:
        visible = mode == "url"
        return gr.Textbox(visible=visible), gr.Textbox(visible=visible)

    async def on_probe(self, mode: str, url: str, model: str) -> str:
        try:
            ref = await engine_ref(self.service, url if mode == "url" else "", model)
        except FormError as exc:
            return panels.probe_error_html(str(exc))
        # Always a fresh probe: the engine may have restarted with other flags.
        handle = await self.service.registry.pool.get(ref, refresh=True)
        return panels.probe_html(handle.tier, handle.tier_reason, handle.served_model, ref.url)

    def _tasks_of(self, spec: str | None) -> tuple[list[tuple[str, str]], str]:
        if not spec:
            return [], ""
        try:
            tasks = self.catalogues.dataset(spec).tasks
        except DatasetError as exc:
            gr.Warning(str(exc))
            return [], f"cannot open dataset {spec!r}: {exc}"
        return task_choices(tasks), tasks[0].instruction if tasks else ""

    def on_dataset(self, spec: str) -> tuple[Any, str]:
        tasks, instruction = self._tasks_of(spec)
        return gr.Dropdown(choices=tasks, value=tasks[0][1] if tasks else None), instruction

    def on_task(self, spec: str, name: str) -> str:
        if not spec or not name:
            return ""
        try:
            return self.catalogues.task(spec, name).instruction
        except DatasetError as exc:
            return str(exc)

    async def on_run(
        self,
        mode: str,
        url: str,
        model: str,
        dataset: str,
        task: str,
        harness: str,
        sandbox: str,
        timeout: float | None,
    ) -> tuple[Any, ...]:
        try:
            sandbox_info = next((s for s in self.catalogues.sandboxes() if s.name == sandbox), None)
            if sandbox_info is not None and not sandbox_info.usable:
                raise FormError(f"sandbox {sandbox} is not usable here: {sandbox_info.reason}")
            if sandbox_info is not None and dataset and task and harness:
                problem = self.catalogues.network_problem(dataset, task, harness, sandbox_info)
                if problem is not None:
                    raise FormError(problem)
            request = await rollout_request(
                self.service,
                dataset=dataset,
                task=task,
                harness=harness,
                sandbox=sandbox,
                engine_url=url if mode == "url" else "",
                model=model,
                timeout_s=timeout,
                source="ui",
            )
        except FormError as exc:
            gr.Warning(str(exc))
            return (gr.skip(),) * 6
        run_id = self.service.submit(request)
        return (
            run_id,
            gr.Timer(active=True),
            panels.live_html("queued", None, 0.0),
            panels.empty_result_html(),
            gr.Button(interactive=False),
            gr.Button(interactive=True),
        )

    def on_cancel(self, run_id: str | None) -> Any:
        if run_id and self.service.cancel(run_id):
            gr.Info("Cancelling: the sandbox is being stopped.")
        return gr.Button(interactive=False)

    async def on_tick(self, run_id: str | None) -> dict[Any, Any]:
        if not run_id:
            return {self.timer: gr.Timer(active=False)}
        try:
            status = self.service.status(run_id)
        except KeyError:
            return {self.timer: gr.Timer(active=False)}
        elapsed = time.time() - status.submitted_at
        live = panels.live_html(status.phase, status.session, elapsed)
        if status.state != "done" or status.result is None:
            return {self.live: live}
        doc, path = self._finished_document(status)
        return {
            self.live: live,
            self.timer: gr.Timer(active=False),
            self.run: gr.Button(interactive=True),
            self.cancel: gr.Button(interactive=False),
            self.history: self.on_refresh(),
            **(await self._show(doc, path)),
        }

    def _finished_document(self, status: RunStatus) -> tuple[dict[str, Any], str | None]:
        result = status.result
        assert result is not None
        if result.document:
            return result.document, result.document_path
        # No document (the run failed before a session existed): show the result itself.
        summary = result.model_dump(mode="json", exclude={"document"})
        summary["engine"] = {"tier": result.tier}
        return summary, None

    async def on_turn(self, doc: dict[str, Any] | None, turn_id: Any, full_prompt: bool) -> str:
        if not doc or turn_id is None:
            return empty_tokens("No turn selected.")
        return await self._tokens(doc, turn_id, full_prompt)

    async def _tokens(self, doc: dict[str, Any], turn_id: Any, full_prompt: bool) -> str:
        try:
            window = token_window(doc, turn_id, full_prompt=full_prompt)
        except KeyError as exc:
            return empty_tokens(str(exc.args[0]))
        engine = doc.get("engine") or {}
        texts, note = await self.texts.lookup(
            engine.get("url") or "", engine.get("model") or "", window.ids
        )
        return render_tokens(doc, turn_id, texts, full_prompt=full_prompt, note=note)

    async def _show(self, doc: dict[str, Any], path: str | None) -> dict[Any, Any]:
        """Every view of one rollout document."""
        first = default_turn(doc)
        tokens = (
            await self._tokens(doc, first, False)
            if first is not None
            else empty_tokens("This rollout captured no model call.")
        )
        return {
            self.doc: doc,
            self.result: panels.result_html(doc),
            self.graph: graph_figure(doc),
            self.turn: gr.Dropdown(choices=turn_choices(doc), value=first),
            self.tokens: tokens,
            self.download: gr.DownloadButton(value=path, interactive=path is not None),
        }

    async def on_history_select(self, evt: gr.SelectData) -> dict[Any, Any]:
        rollout_id = str(evt.row_value[0])
        doc = self.service.store.get_document(rollout_id)
        if doc is None:
            gr.Warning(f"rollout {rollout_id} has no stored document")
            return {}
        return await self._show(doc, str(self.service.store.document_path(rollout_id)))

    def on_refresh(self) -> list[list[Any]]:
        return history_rows(self.service.store.list_rollouts(limit=100))


def build_ui(service: WorkbenchService, settings: Settings) -> gr.Blocks:
    """The page, with the named API endpoints registered on it."""
    catalogues = Catalogues(settings.datasets, service.datasets, service.sandboxes)
    return WorkbenchPage(service, settings, catalogues).build()


def allowed_paths(service: WorkbenchService) -> list[str]:
    """Folders Gradio may serve files from (the stored documents, for the download button)."""
    return [str(Path(service.store.documents_dir).resolve())]
