"""What the pickers and the API list: datasets, tasks, harnesses and sandboxes.

The catalogue modules cache their own results (dataset task lists, harness introspection,
sandbox preflights); this adds the list of dataset specs the app offers and the JSON shapes.
"""

from collections.abc import Sequence

from pydantic import BaseModel

from workbench.datasets import Dataset, DatasetError, DatasetResolver, TaskInfo
from workbench.harnesses import HarnessInfo, harness_catalogue
from workbench.network_fit import network_problem
from workbench.sandboxes import SandboxCatalogue, SandboxInfo


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
    """`specs` are the dataset specs offered first (settings.datasets); a spec that resolves
    when typed into the picker is offered from then on. `datasets` resolves them (the service's
    resolver, caching under its home); `sandboxes` caches the sandbox verdicts (the service's)."""

    def __init__(
        self,
        specs: Sequence[str],
        datasets: DatasetResolver,
        sandboxes: SandboxCatalogue | None = None,
    ):
        self.specs = list(dict.fromkeys(specs))
        self.resolver = datasets
        self.sandbox_verdicts = sandboxes or SandboxCatalogue()

    def dataset(self, spec: str) -> Dataset:
        """The resolved dataset; raises DatasetError (with what to do) when it cannot be."""
        dataset = self.resolver.resolve(spec)
        if spec not in self.specs:
            self.specs.append(spec)
        return dataset

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

    def task(self, spec: str, name: str) -> TaskInfo:
        task = next((t for t in self.dataset(spec).tasks if t.name == name), None)
        if task is None:
            raise DatasetError(f"dataset {spec!r} has no task {name!r}")
        return task

    def harnesses(self) -> list[HarnessInfo]:
        return list(harness_catalogue())

    def sandboxes(self) -> list[SandboxInfo]:
        return self.sandbox_verdicts.all()

    def network_problem(
        self, spec: str, task: str, harness: str, sandbox: SandboxInfo
    ) -> str | None:
        """Why these picks cannot reach the proxy (workbench.network_fit), or None; an unknown
        task or harness is left for the rollout to report."""
        harness_info = next((h for h in self.harnesses() if h.name == harness), None)
        try:
            task_info = self.task(spec, task)
        except DatasetError:
            return None
        return network_problem(task_info, harness_info, sandbox) if harness_info else None


def task_entry(task: TaskInfo) -> TaskEntry:
    return TaskEntry(
        name=task.name,
        instruction=task.instruction,
        agent_timeout_s=task.agent_timeout_s,
        verifier_timeout_s=task.verifier_timeout_s,
        network=task.network,
    )
