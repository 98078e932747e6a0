#!/bin/bash
# Reward 1 when /app/summary.json matches the CSV, else 0.
mkdir -p /logs/verifier
if python3 -c '
import json, math
s = json.load(open("/app/summary.json"))
assert s["rows"] == 5, s["rows"]
assert math.isclose(s["total"], 25.0), s["total"]
want = {"north": 17.5, "south": 5.5, "east": 2.0}
assert set(s["by_region"]) == set(want), s["by_region"]
assert all(math.isclose(s["by_region"][k], v) for k, v in want.items()), s["by_region"]
print("summary.json is correct")
'; then
    echo 1 > /logs/verifier/reward.txt
else
    echo 0 > /logs/verifier/reward.txt
fi
