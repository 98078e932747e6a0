#!/bin/bash
set -euo pipefail
sed -i 's/(len(values) + 1)/len(values)/' /app/stats.py
python3 /app/test_stats.py
