"""The one settings model of the workbench (env vars WORKBENCH_*). Nothing else reads the env."""

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="WORKBENCH_", extra="ignore")

    home: Path = Field(
        default=Path.home() / ".workbench",
        description="Where rollouts, documents, the SQLite index and Harbor's jobs/ live.",
    )
    host: str = "127.0.0.1"
    port: int = 7860
    public_url: str | None = Field(
        default=None, description="Proxy base URL given to harnesses; overrides the derived one."
    )
    admin_key: str | None = Field(default=None, description="Guards the capture control plane.")
    max_tokens_ceiling: int = 8192
    max_body_bytes: int = 64 * 1024 * 1024
    max_rollouts: int = Field(default=4, ge=1, description="Rollouts running at once.")
    max_sandbox_creates: int = Field(
        default=2, ge=1, description="Sandboxes booting at once (providers rate-limit creates)."
    )
    sandbox_root: Path | None = Field(
        default=None,
        description="Where the local sandbox creates per-trial roots; default "
        "<tmp>/workbench-sandboxes.",
    )
    # UI / app (engineer G).
    engine_url: str | None = Field(
        default=None, description="Engine the UI offers first; None = the embedded engine."
    )
    engine_hosts: str | None = Field(
        default=None,
        description="Engines a session may use, comma-separated host[:port]. Unset: any on a "
        "local server; on a public one only engine_url's host and the embedded engine.",
    )
    datasets: list[str] = Field(
        default_factory=lambda: ["demo"], description="Dataset specs the UI offers (JSON list)."
    )
    space_host: str | None = Field(
        default=None, validation_alias="SPACE_HOST", description="Set by Hugging Face Spaces."
    )
    space_id: str | None = Field(
        default=None, validation_alias="SPACE_ID", description="owner/name, set by Spaces."
    )
