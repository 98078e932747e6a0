"""DESIGN.md §3: nothing global at import time, beyond the one environment default harbor needs."""

import os
import subprocess
import sys
from pathlib import Path

import workbench

PACKAGE = Path(workbench.__file__).parent


def test_litellm_offline_cost_map_is_set_in_exactly_one_place():
    # It was repeated in five modules; one copy forgotten meant a ~10 s network retry offline.
    setters = sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if 'setdefault("LITELLM_LOCAL_MODEL_COST_MAP"' in path.read_text()
    )
    assert setters == ["__init__.py"]


def test_any_workbench_import_sets_the_cost_map_before_harbor_loads_litellm():
    env = {k: v for k, v in os.environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"}
    code = (
        "import os, sys; import workbench.harbor_trial; "
        "assert 'harbor' in sys.modules; print(os.environ['LITELLM_LOCAL_MODEL_COST_MAP'])"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"


def test_importing_workbench_creates_no_session_key_variables():
    # They were created by a module-level SessionKeys(); now each service creates its own.
    code = (
        "import os; import workbench.rollout, workbench.service, workbench.sandboxes; "
        "print(sorted(k for k in os.environ if k.startswith('WORKBENCH_SESSION_KEY')))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKBENCH_SESSION_KEY")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_two_services_session_keys_never_share_a_variable_and_rollouts_only_overwrite():
    from workbench.harbor_trial import SessionKeys

    first, second = SessionKeys(2), SessionKeys(2)
    names = set(os.environ)  # every variable exists from here on (Errno 14: see SessionKeys)
    a, b = first.acquire("session-a"), second.acquire("session-b")
    assert a != b and (os.environ[a], os.environ[b]) == ("session-a", "session-b")
    first.release(a)
    second.release(b)
    assert os.environ[a] == os.environ[b] == "" and set(os.environ) == names
