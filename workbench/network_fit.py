"""Whether a harness can reach the capture proxy from a task's network in a given sandbox.

A harness installed *in* the sandbox calls the proxy from there. On a `no-network` task Harbor
turns the policy into an allowlist holding the proxy's host; a sandbox that cannot enforce
allowlists (the local one: bubblewrap gives all or nothing) makes `Trial.create` raise
`ValueError: network_mode='allowlist' is not supported`. Refusing before the trial names the fix.
"""

from workbench.datasets import TaskInfo
from workbench.harnesses import HarnessInfo
from workbench.sandboxes import SandboxInfo, is_local

WHAT_TO_DO = (
    "use a host-side harness such as terminus-2, a task whose network_mode is public, or a "
    "sandbox that enforces allowlists such as docker"
)


def network_problem(task: TaskInfo, harness: HarnessInfo, sandbox: SandboxInfo) -> str | None:
    """Why this task/harness/sandbox combination cannot run, or None when it can."""
    in_sandbox = harness.redirectable and not harness.host_side
    allowlist = task.network_mode == "allowlist" or (
        in_sandbox and task.network_mode == "no-network"
    )
    # Only the local sandbox is known here without creating an instance; any other
    # environment's `capabilities` is checked by Harbor itself in `Trial.create`.
    if not allowlist or not is_local(sandbox):
        return None
    if task.network_mode == "allowlist":
        why = f"task {task.name!r} has network_mode 'allowlist'"
    else:
        why = (
            f"{harness.name!r} runs inside the sandbox and task {task.name!r} has no network, "
            "so Harbor would allow only the capture proxy's host"
        )
    return f"{why}, which the {sandbox.name} sandbox cannot enforce; {WHAT_TO_DO}"
