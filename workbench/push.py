"""Deploy this repository to a Hugging Face Docker Space (`workbench push`).

The Space runs the repo's Dockerfile (`python app.py --host 0.0.0.0` on port 7860). Secrets are
copied from the caller's environment by name, never from files, so keys stay out of the upload.
"""

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
from huggingface_hub import HfApi, constants, get_token

# Never uploaded: local state, caches, test output and anything that may hold credentials.
IGNORE_PATTERNS = [
    ".git/*",
    ".venv/*",
    "**/__pycache__/*",
    "*.pyc",
    ".pytest_cache/*",
    ".ruff_cache/*",
    ".workbench/*",
    "test-artifacts/*",
    "*.egg-info/*",
    "build/*",
    "dist/*",
    ".env",
    ".env.*",
]


class PushError(Exception):
    """A deploy that cannot proceed; the message says what to do."""


@dataclass(frozen=True)
class PushResult:
    repo_id: str
    url: str
    secrets: tuple[str, ...]


def secret_values(names: Sequence[str], environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The named secrets from the environment; every missing one is reported at once."""
    missing = [n for n in names if not environ.get(n)]
    if missing:
        raise PushError(
            f"secret(s) {', '.join(missing)} not set in the environment: export them first "
            "(each --secret NAME copies the value of $NAME to the Space)"
        )
    return {n: environ[n] for n in names}


def check_reachable(endpoint: str, timeout_s: float) -> None:
    """Fail fast offline: huggingface_hub retries network errors with backoff for minutes."""
    try:
        httpx.head(endpoint, timeout=timeout_s, follow_redirects=False)
    except httpx.HTTPError as exc:
        raise PushError(
            f"cannot reach {endpoint} ({type(exc).__name__}: {exc}): check the network "
            "(or HF_ENDPOINT) and retry"
        ) from exc


def push(
    repo_id: str,
    *,
    root: Path,
    secrets: Sequence[str] = (),
    private: bool = False,
    token: str | None = None,
    timeout_s: float = 10.0,
) -> PushResult:
    """Create (or reuse) the Docker Space `repo_id`, upload `root`, set the secrets.

    repo_id: "user/space-name".
    root: the repository folder holding the Dockerfile and README.md (with Space front matter).
    secrets: names of environment variables copied to the Space as secrets.
    private: create the Space private (ignored when it already exists).
    token: a Hugging Face write token; default: HF_TOKEN or the cached login.
    timeout_s: how long the reachability check may take before giving up.
    """
    if "/" not in repo_id:
        raise PushError(f"space id must be 'owner/name', got {repo_id!r}")
    if not (root / "Dockerfile").is_file():
        raise PushError(f"{root} has no Dockerfile: run `workbench push` from the repository root")
    values = secret_values(secrets)
    token = token or get_token()
    if not token:
        raise PushError("no Hugging Face token: run `hf auth login` or set HF_TOKEN")
    check_reachable(constants.ENDPOINT, timeout_s)
    api = HfApi(token=token)
    url = api.create_repo(
        repo_id, repo_type="space", space_sdk="docker", private=private, exist_ok=True
    )
    api.upload_folder(
        repo_id=repo_id,
        repo_type="space",
        folder_path=root,
        ignore_patterns=IGNORE_PATTERNS,
        commit_message="Deploy Harbor Workbench",
    )
    for name, value in values.items():
        api.add_space_secret(repo_id, name, value)
    return PushResult(repo_id=repo_id, url=str(url), secrets=tuple(values))
