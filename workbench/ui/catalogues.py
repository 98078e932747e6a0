"""What the pickers and the API list: datasets (resolved once per spec), harnesses, sandboxes.

Resolving a dataset may read a registry or clone a repo, and the sandbox catalogue runs
preflights, so each is computed once per app and shared by the UI and the API endpoints.
"""

import threading
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from workbench.datasets import Dataset, DatasetError, resolve_dataset
from workbench.harnesses import HarnessInfo, harness_catalogue
from workbench.sandboxes import SandboxInfo, sandbox_catalogue


class DatasetEntry(BaseModel):
    """One dataset spec as the pickers show it; `error` when it could not be resolved."""

    spec: str
    name: str
    source: str = ""
    tasks: int = 0
    error: str | None = None


class TaskEntry(BaseModel):
    name: str
    instruction: str
    agent_timeout_s: float | None = None
    verifier_timeout_s: float | None = None
    network: bool | None = None


class Catalogues:
    """Cached catalogues. `specs` are the dataset specs offered first (settings.datasets)."""

    def __init__(self, specs: Sequence[str]):
        self.specs = list(dict.fromkeys(specs))
        self._datasets: dict[str, Dataset | DatasetError] = {}
        self._harnesses: list[HarnessInfo] | None = None
        self._sandboxes: list[SandboxInfo] | None = None
        self._lock = threading.Lock()

    def dataset(self, spec: str) -> Dataset:
        """The resolved dataset; raises DatasetError (with what to do) when it cannot be."""
        with self._lock:
            cached = self._datasets.get(spec)
        if cached is None:
            try:
                cached = resolve_dataset(spec)
            except DatasetError as exc:
                cached = exc
            with self._lock:
                self._datasets[spec] = cached
                if spec not in self.specs:
                    self.specs.append(spec)
        if isinstance(cached, DatasetError):
            raise cached
        return cached

    def datasets(self) -> list[DatasetEntry]:
        entries = []
        for spec in list(self.specs):
            try:
                d = self.dataset(spec)
            except DatasetError as exc:
                entries.append(DatasetEntry(spec=spec, name=spec, error=str(exc)))
                continue
            entries.append(
                DatasetEntry(spec=spec, name=d.name, source=str(d.source), tasks=len(d.tasks))
            )
        return entries

    def tasks(self, spec: str) -> list[TaskEntry]:
        return [task_entry(t) for t in self.dataset(spec).tasks]

    def task(self, spec: str, name: str) -> Any:
        task = next((t for t in self.dataset(spec).tasks if t.name == name), None)
        if task is None:
            raise DatasetError(f"dataset {spec!r} has no task {name!r}")
        return task

    def harnesses(self) -> list[HarnessInfo]:
        if self._harnesses is None:
            self._harnesses = list(harness_catalogue())
        return self._harnesses

    def sandboxes(self) -> list[SandboxInfo]:
        if self._sandboxes is None:
            self._sandboxes = list(sandbox_catalogue())
        return self._sandboxes


def task_entry(task: Any) -> TaskEntry:
    return TaskEntry(
        name=task.name,
        instruction=task.instruction,
        agent_timeout_s=task.agent_timeout_s,
        verifier_timeout_s=task.verifier_timeout_s,
        network=task.network,
    )
