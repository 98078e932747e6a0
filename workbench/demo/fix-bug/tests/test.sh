#!/bin/bash
# Reward 1 when the visible tests and a hidden check pass, else 0.
mkdir -p /logs/verifier
cd /app || { echo 0 > /logs/verifier/reward.txt; exit 0; }
if python3 test_stats.py && python3 -c '
from stats import mean
assert mean([1, 2]) == 1.5
assert mean([-3, 3, 9]) == 3
try:
    mean([])
except ValueError:
    pass
else:
    raise SystemExit("mean([]) must raise ValueError")
print("hidden checks passed")
'; then
    echo 1 > /logs/verifier/reward.txt
else
    echo 0 > /logs/verifier/reward.txt
fi
