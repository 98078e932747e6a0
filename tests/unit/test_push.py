"""`workbench push` fails fast and clearly when it cannot deploy (offline, no secret, no token)."""

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.push import IGNORE_PATTERNS, PushError, check_reachable, push, secret_values

ROOT = Path(__file__).resolve().parents[2]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_hub_is_a_clear_error_within_the_timeout():
    with pytest.raises(PushError, match=r"cannot reach http://127\.0\.0\.1.*check the network"):
        check_reachable(f"http://127.0.0.1:{closed_port()}", timeout_s=2.0)


def test_missing_secrets_are_all_named_before_anything_is_uploaded():
    with pytest.raises(PushError, match="A_KEY, B_KEY not set"):
        secret_values(["A_KEY", "B_KEY", "C_KEY"], environ={"C_KEY": "x"})
    assert secret_values(["C_KEY"], environ={"C_KEY": "x"}) == {"C_KEY": "x"}


def test_bad_space_id_and_missing_dockerfile_are_refused(tmp_path):
    with pytest.raises(PushError, match="owner/name"):
        push("no-slash", root=ROOT, token="hf_x")
    with pytest.raises(PushError, match="no Dockerfile"):
        push("me/space", root=tmp_path, token="hf_x")


def test_local_state_and_credentials_are_never_uploaded():
    for pattern in (".venv/*", ".git/*", ".workbench/*", ".env", "test-artifacts/*"):
        assert pattern in IGNORE_PATTERNS


def test_push_command_offline_exits_with_a_clear_error():
    env = {
        **os.environ,
        "HF_ENDPOINT": f"http://127.0.0.1:{closed_port()}",
        "HF_TOKEN": "hf_not_a_real_token",
    }
    cmd = [sys.executable, "-m", "workbench.cli", "push", "me/workbench", "--root", str(ROOT)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "error: cannot reach http://127.0.0.1" in done.stderr
