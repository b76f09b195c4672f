#!/usr/bin/env python3
"""one_variant.py TASK.json OUT.json: the task with every varying move reduced to its first variant.

The KA-mDTW benchmarks (scripts/benchmark-suite.sh, scripts/ka-deviation-check.sh) record the
reference with one place of a pick-and-place, or one pose of a snap-fit, and run the task with all."""
import json
import sys

if len(sys.argv) != 3:
    sys.exit("usage: one_variant.py TASK.json OUT.json")
task = json.load(open(sys.argv[1]))
if not any("move_variants" in step for step in task.get("steps", [])):
    sys.exit("one_variant: %s has no step with move_variants (expected a task that varies)" % sys.argv[1])
for step in task["steps"]:
    if "move_variants" in step:
        step["move"] = step.pop("move_variants")[0]
json.dump(task, open(sys.argv[2], "w"), indent=1)
