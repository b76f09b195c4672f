#!/usr/bin/env python3
"""one_variant.py TASK.json OUT.json [COUNT]: the task with every varying move reduced to its first
variant (COUNT = 1, the default) or to its first COUNT variants, taken in turn cycle after cycle.

The KA-mDTW benchmarks (scripts/benchmark-suite.sh, scripts/ka-deviation-check.sh) record the
reference with one place of a pick-and-place, or one pose of a snap-fit, and run the task with all;
scripts/ka-deviation-check.sh also records a snap-fit reference with two poses (COUNT = 2), as the
thesis's reference held presses at two lever lengths."""
import json
import sys

if len(sys.argv) not in (3, 4):
    sys.exit("usage: one_variant.py TASK.json OUT.json [COUNT]")
count = 1
if len(sys.argv) == 4:
    try:
        count = int(sys.argv[3])
    except ValueError:
        count = 0
    if count < 1:
        sys.exit("one_variant: COUNT '%s' is not a whole number >= 1" % sys.argv[3])
task = json.load(open(sys.argv[1]))
if not any("move_variants" in step for step in task.get("steps", [])):
    sys.exit("one_variant: %s has no step with move_variants (expected a task that varies)" % sys.argv[1])
for step in task["steps"]:
    if "move_variants" in step:
        variants = step["move_variants"]
        if count > len(variants):
            sys.exit("one_variant: COUNT %d, but a varying move of %s has only %d variants" % (count, sys.argv[1], len(variants)))
        if count == 1:
            step["move"] = step.pop("move_variants")[0]
        else:
            step["move_variants"] = variants[:count]
json.dump(task, open(sys.argv[2], "w"), indent=1)
