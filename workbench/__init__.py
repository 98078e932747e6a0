"""workbench: Harbor datasets, harnesses, sandboxes, rollouts, storage, CLI and UI."""

import os

# litellm (imported by harbor) fetches a model cost map over the network on import unless told
# not to; offline that costs ~10 s of retries. Set here, the one place every `workbench.*` import
# runs first, so it precedes any harbor import; setdefault keeps a value the user chose.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
