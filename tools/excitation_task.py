#!/usr/bin/env python3
"""An excitation run for the arm model: each joint moved alone, out and back, from the task's pose.

    excitation_task.py TASK.json ROBOT.json OUT.json [--amplitude RAD]

A dry run of the task moves the joints the way the task does. Where two joints always move together
(a pick-and-place turns the wrist with the base to keep the tool's heading), the arm model cannot
tell their inertias apart (`warpguard identify dynamics` warns) and mispredicts a motion of one
without the other, such as a contact's jolt. This program moves every joint alone by +-AMPLITUDE
(default 0.4 rad, kept inside the robot's joint limits) from the pose of the task's first move and
back, at the task's speed and acceleration limits; give its recording to `identify dynamics` as one
more --dry-run. Run it with nothing in the gripper (warpguard-sim --payload 0), like the dry run."""
import json, sys

args = [a for a in sys.argv[1:]]
amplitude = 0.4
if "--amplitude" in args:
    k = args.index("--amplitude")
    try:
        amplitude = float(args[k + 1])
    except (IndexError, ValueError):
        sys.exit("excitation_task.py: --amplitude needs a number of radians, got %r" % (args[k + 1:k + 2] or ["nothing"])[0])
    del args[k:k + 2]
    if not amplitude > 0:
        sys.exit("excitation_task.py: --amplitude is %g rad; expected > 0" % amplitude)
if len(args) != 3:
    sys.exit("usage: excitation_task.py TASK.json ROBOT.json OUT.json [--amplitude RAD]")
task = json.load(open(args[0]))
robot = json.load(open(args[1]))
if not isinstance(task, dict) or not isinstance(task.get("steps"), list):
    sys.exit("excitation_task.py: %s has no 'steps' list (expected a task program of samples/tasks/)" % args[0])
moves = [s["move"] for s in task["steps"] if "move" in s]
if not moves:
    sys.exit("excitation_task.py: %s has no 'move' step to start from" % args[0])
centre = list(moves[0])
joints = robot.get("joints", [])
if len(joints) != len(centre):
    sys.exit("excitation_task.py: %s has %d joints; the task's moves have %d" % (args[1], len(joints), len(centre)))
steps = [{"move": centre}]
for k, joint in enumerate(joints):
    lower, upper = joint["limits"]
    for sign in (1.0, -1.0):
        target = min(max(centre[k] + sign * amplitude, lower), upper)
        if target == centre[k]:
            continue
        pose = list(centre)
        pose[k] = target
        steps += [{"move": pose}, {"move": centre}]
out = {"name": "%s-excitation" % task.get("name", "task"), "home": task.get("home", centre),
       "max_velocity": task["max_velocity"], "max_acceleration": task["max_acceleration"], "steps": steps}
json.dump(out, open(args[2], "w"), indent=1)
