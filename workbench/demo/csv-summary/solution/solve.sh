#!/bin/bash
set -euo pipefail
python3 -c '
import csv, json
rows = list(csv.DictReader(open("/app/sales.csv")))
by_region = {}
for r in rows:
    by_region[r["region"]] = by_region.get(r["region"], 0) + float(r["amount"])
json.dump({"rows": len(rows), "total": sum(float(r["amount"]) for r in rows), "by_region": by_region}, open("/app/summary.json", "w"))
'
