#!/usr/bin/env python3
"""The dry run of a task program: the same steps with every press at 1e-9 N.

    dry_task.py TASK.json OUT.json

A dry run of a task (the arm model's recording, `warpguard identify dynamics`) is the same program
with no part to carry - warpguard-sim --payload 0 - and nothing to press. The simulator refuses a
press of 0 N, so the presses keep their timing and draw the same random numbers at 1e-9 N."""
import json, sys

if len(sys.argv) != 3:
    sys.exit("usage: dry_task.py TASK.json OUT.json")
task = json.load(open(sys.argv[1]))
if not isinstance(task, dict) or not isinstance(task.get("steps"), list):
    sys.exit("dry_task.py: %s has no 'steps' list (expected a task program of samples/tasks/)" % sys.argv[1])
for step in task["steps"]:
    if "press" in step:
        step["press"]["magnitude"] = 1e-9
json.dump(task, open(sys.argv[2], "w"), indent=1)
