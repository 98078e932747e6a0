"""workbench: Harbor datasets, harnesses, sandboxes, rollouts, storage, CLI and UI."""
