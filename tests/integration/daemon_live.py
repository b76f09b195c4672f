#!/usr/bin/env python3
"""Integration tests: warpguardd, the simulated robot (warpguard-sim run) and the warpguard CLI over
loopback, all real processes, real sockets and a real SQLite file.

    daemon_live.py BUILD_DIR SOURCE_DIR TEST

TEST is one of: refusals, detect, kill9, interrupted, identify, payload, override. Each prints what it measured and exits non-zero on failure.
Python's standard library only (json, socket, subprocess)."""
import csv, json, os, re, signal, socket, subprocess, sys, tempfile, threading, time

BUILD, SOURCE, TEST = sys.argv[1], sys.argv[2], sys.argv[3]
DAEMON = os.path.join(BUILD, "server", "warpguardd")
SIM = os.path.join(BUILD, "samples", "sim", "warpguard-sim")
CLI = os.path.join(BUILD, "tools", "warpguard")
ROBOT = os.path.join(SOURCE, "samples", "robots", "ur5e-like.json")
TASK = os.path.join(SOURCE, "samples", "tasks", "ur5e-like-pick-and-place.json")
TOKEN = "integration-token-123"
failures = []


def check(condition, what):
    print(("ok    " if condition else "FAIL  ") + what, flush=True)
    if not condition:
        failures.append(what)


class Daemon:
    def __init__(self, data_dir, robots):
        self.data_dir = data_dir
        self.config = os.path.join(data_dir, "warpguardd.json")
        with open(self.config, "w") as f:
            json.dump({"robot_listen": "127.0.0.1:0", "control_listen": "127.0.0.1:0", "token": TOKEN,
                       "data_dir": data_dir, "robots": robots}, f)
        self.start()

    def start(self, robot_port=0, control_port=0):
        with open(self.config) as f:
            cfg = json.load(f)
        cfg["robot_listen"] = "127.0.0.1:%d" % robot_port
        cfg["control_listen"] = "127.0.0.1:%d" % control_port
        with open(self.config, "w") as f:
            json.dump(cfg, f)
        ready = os.path.join(self.data_dir, "ready.json")
        if os.path.exists(ready):
            os.remove(ready)
        self.stderr = open(os.path.join(self.data_dir, "stderr.log"), "a")
        self.proc = subprocess.Popen([DAEMON, "--config", self.config, "--ready-file", ready], stderr=self.stderr)
        # The daemon loads every robot's profile before it listens (a detector per profile): wait
        # as long as it lives, up to a minute.
        for _ in range(3000):
            if os.path.exists(ready) or self.proc.poll() is not None:
                break
            time.sleep(0.02)
        if not os.path.exists(ready):
            raise RuntimeError("warpguardd %s before it was ready (see %s)"
                               % ("exited with %s" % self.proc.returncode if self.proc.poll() is not None else "was not ready after a minute",
                                  os.path.join(self.data_dir, "stderr.log")))
        with open(ready) as f:
            r = json.load(f)
        self.robot_port, self.control_port = r["robot_port"], r["control_port"]

    def log(self):
        with open(os.path.join(self.data_dir, "warpguardd.log")) as f:
            return f.read()

    def ctl(self, *args, check_rc=True):
        p = subprocess.run([CLI, "ctl", "--port", str(self.control_port), "--token", TOKEN, *args],
                           capture_output=True, text=True, timeout=120)
        if check_rc and p.returncode != 0:
            raise RuntimeError("warpguard ctl %s failed: %s" % (" ".join(args), p.stderr.strip()))
        return p

    def call(self, request):
        p = self.ctl("--json", "call", json.dumps(request))
        return json.loads(p.stdout)

    def stop(self, sig=signal.SIGTERM):
        self.proc.send_signal(sig)
        self.proc.wait(timeout=10)


def robot_link(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=2)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def read_exact(s, n):
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data


def sample(seq, value="1.0"):
    return ("%d;1;0;%.3f;%s;2;3;4;5;6;0;0;0;0;0;0\n" % (seq, seq * 0.004, value)).encode()


CONTINUE, STOP = b"\x00\x00\x00\x00", b"\x00\x00\x00\x01"
UR = {"id": "cell1", "vendor": "ur", "signal": "torque", "unit": "Nm", "joints": 6, "address": "127.0.0.1"}


def test_refusals(tmp):
    d = Daemon(tmp, [UR])
    try:
        # Control API: nothing before hello, and a wrong token is refused and logged.
        c = socket.create_connection(("127.0.0.1", d.control_port), timeout=2)
        f = c.makefile("rw")
        f.write(json.dumps({"cmd": "robots"}) + "\n"); f.flush()
        a = json.loads(f.readline())
        check(not a["ok"] and "hello" in a["error"], "control request before hello refused: %s" % a["error"])
        f.write(json.dumps({"cmd": "hello", "token": "not-the-token"}) + "\n"); f.flush()
        a = json.loads(f.readline())
        check(not a["ok"] and a["error"] == "wrong token", "wrong control token refused: %s" % a["error"])
        check(f.readline() == "", "connection closed after the wrong token")
        p = d.ctl("robots", check_rc=False)
        check(p.returncode == 0 and "cell1" in p.stdout, "the right token is accepted")
        time.sleep(0.1)
        check("control: wrong token from 127.0.0.1" in d.log(), "wrong token logged")

        # Unknown robot: STOP, closed, logged with the configured ids.
        s = robot_link(d.robot_port)
        s.sendall(b"WG1;nobody;ur;torque;Nm;6;rad;2;20;ascii\n")
        check(read_exact(s, 4) == STOP, "unknown robot answered STOP")
        check(s.recv(4) == b"", "unknown robot's connection closed")
        time.sleep(0.1)
        check("unknown robot 'nobody' from 127.0.0.1" in d.log() and "configured robots: cell1" in d.log(), "unknown robot logged")

        # A handshake that does not match the configuration.
        s = robot_link(d.robot_port)
        s.sendall(b"WG1;cell1;ur;torque;Nm;7;rad;2;20;ascii\n")
        check(read_exact(s, 4) == STOP, "handshake with 7 joints for a 6-joint robot answered STOP")
        time.sleep(0.1)
        check("7 joints but the robot is configured with 6" in d.log(), "joint-count mismatch logged")

        # A malformed sample: STOP, latched, logged with the field and value; only the API resumes.
        s = robot_link(d.robot_port)
        s.sendall(b"WG1;cell1;ur;torque;Nm;6;rad;4;20;ascii\n")
        check(read_exact(s, 4) == CONTINUE, "valid handshake answered CONTINUE")
        s.sendall(sample(0))
        check(read_exact(s, 4) == CONTINUE, "valid sample answered CONTINUE")
        s.sendall(sample(1, "abc"))
        check(read_exact(s, 4) == STOP, "malformed sample answered STOP")
        s.sendall(sample(2))
        check(read_exact(s, 4) == STOP, "the stop is latched: the next valid sample also gets STOP")
        time.sleep(0.1)
        check("malformed sample from 127.0.0.1" in d.log() and "signal1 is 'abc'" in d.log(), "malformed sample logged with field and value")
        st = d.call({"cmd": "robot", "robot": "cell1"})
        check(st["latched"] and "malformed" in st["reason"], "status shows the latch and its reason: %s" % st["reason"])
        # Reconnecting does not release it.
        s.close()
        s = robot_link(d.robot_port)
        s.sendall(b"WG1;cell1;ur;torque;Nm;6;rad;4;20;ascii\n")
        check(read_exact(s, 4) == STOP, "after a reconnect the handshake is answered STOP (still latched)")
        s.sendall(sample(3))
        check(read_exact(s, 4) == STOP, "after a reconnect samples are answered STOP")
        d.ctl("resume", "cell1", "--operator", "integration-test")
        s.sendall(sample(4))
        check(read_exact(s, 4) == CONTINUE, "after the API's resume: CONTINUE")
        ev = d.call({"cmd": "events", "robot": "cell1", "kind": "resume"})["events"]
        check(len(ev) == 1 and "integration-test" in ev[0]["reason"], "resume logged with the operator's name")
        # DETECT without a profile is refused by the API (a robot cannot be put in DETECT blind).
        p = d.ctl("mode", "cell1", "detect", check_rc=False)
        check(p.returncode != 0 and "no active profile" in p.stderr, "DETECT without a profile refused: %s" % p.stderr.strip())
        # Sequence gaps are counted (the malformed sample's number was unreadable: it counts as one).
        gaps = d.call({"cmd": "robot", "robot": "cell1"})["gaps"]
        s.sendall(sample(10))
        read_exact(s, 4)
        st = d.call({"cmd": "robot", "robot": "cell1"})
        check(st["gaps"] - gaps == 5, "sequence gap 4 -> 10 counted as 5 missing samples (got %d)" % (st["gaps"] - gaps))
    finally:
        d.stop()


class FeedReader:
    """A control-API subscriber collecting one robot's feed points in a thread (as the panel does)."""

    def __init__(self, port, robot):
        self.points, self.sock = [], socket.create_connection(("127.0.0.1", port), timeout=5)
        self.file = self.sock.makefile("r")
        for request in ({"cmd": "hello", "token": TOKEN, "client": "feed-test"}, {"cmd": "subscribe", "feed": [robot], "decimate": 1}):
            self.sock.sendall((json.dumps(request) + "\n").encode())
            answer = json.loads(self.file.readline())
            check(answer.get("ok", True) is not False, "subscribe answered %s" % answer)
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        try:
            for line in self.file:
                message = json.loads(line)
                if "feed" in message:
                    self.points.extend(message["points"])
        except (OSError, ValueError):
            pass

    def close(self):
        self.sock.close()
        self.thread.join(timeout=5)


def identify_and_store_model(d, tmp):
    """The robot's kinematic model, identified on the simulated controller, stored for cell1."""
    points, model = os.path.join(tmp, "points.csv"), os.path.join(tmp, "model.json")
    subprocess.run([SIM, "identify", "--robot", ROBOT, "--out", points, "--noise-mm", "0.05", "--seed", "3"], check=True,
                   capture_output=True, timeout=120)
    subprocess.run([CLI, "identify", "dh", "--points", points, "--out", model], check=True, capture_output=True, timeout=120)
    d.ctl("set-model", "cell1", model)


def record_task(d, tmp, *sim_args):
    """17 cycles of the task at 8x, cycles 1-16 recorded in IDLE; returns record_stop's answer."""
    sim, _ = run_sim(d, tmp, "--cycles", "17", "--speed", "8", "--seed", "7", "--timeout-ms", "100", *sim_args)
    d.ctl("wait", "cell1", "--state", "idle", "--timeout", "20")
    d.ctl("wait", "cell1", "--cycle", "1", "--timeout", "30")
    d.ctl("record-start", "cell1")
    d.ctl("wait", "cell1", "--cycle", "16", "--timeout", "120")
    rec = json.loads(d.ctl("--json", "record-stop", "cell1").stdout)
    sim.wait(timeout=120)
    return rec


def test_payload(tmp):
    """A robot configured to declare its payload: the handshake must say so, recordings carry the
    payload, calibration with the robot's identified model fits the payload model, and in DETECT a
    part twice as heavy as the reference's, declared by the program, is expected, not stopped."""
    d = Daemon(tmp, [dict(UR, payload=True)])
    try:
        s = robot_link(d.robot_port)
        s.sendall(b"WG1;cell1;ur;torque;Nm;6;rad;4;20;ascii\n")
        check(read_exact(s, 4) == STOP, "a handshake without the payload option for a robot configured with it answered STOP")
        s.close()
        time.sleep(0.1)
        check("its samples do not declare the payload but the robot is configured with it" in d.log(), "payload mismatch logged")
        text = "".join(f["text"] for f in d.call({"cmd": "script", "robot": "cell1", "host": "127.0.0.1"})["files"])
        check(";ascii;payload\"" in text and "get_target_payload()" in text, "the daemon's script for the robot declares the payload")
        # The robot's kinematic model, identified on the simulated controller, stored for the robot.
        identify_and_store_model(d, tmp)
        rec = record_task(d, tmp, "--declare-payload")
        with open(rec["path"]) as f:
            header = next(line for line in f if not line.startswith("#"))
        check(header.strip().endswith(",q6,payload"), "the recording carries the declared payload: %s" % header.strip()[-30:])
        cal = json.loads(d.ctl("--json", "calibrate", "cell1", "--reference-cycles", "3", "--activate", "--timeout", "300").stdout)
        note = cal["summary"].get("payload_model", "")
        check(note.startswith("fitted from"), "calibration fitted the payload model: %s" % note)
        # Without a dry run, the default detector with the robot's model matches the deviation from the
        # arm model fitted on the task's recording itself, less its declared part.
        arm = cal["summary"].get("arm_model", {})
        check(arm.get("fitted_on") == "task recording" and arm.get("dry_run") == 0 and arm.get("samples", 0) > 1000 and
              "less its declared payload" in arm.get("payload", ""),
              "the arm model is fitted on the task's recording (%s samples; %s)" % (arm.get("samples"), arm.get("payload")))
        plain = json.loads(d.ctl("--json", "calibrate", "cell1", "--reference-cycles", "3", "--no-arm", "--timeout", "300").stdout)
        check("arm_model" not in plain["summary"], "--no-arm matches the signal as recorded: %s" % plain["summary"].get("arm_model"))
        d.ctl("mode", "cell1", "detect")
        # The same task with a part twice as heavy, declared by the program.
        with open(TASK) as f:
            part = max(step.get("grasp", 0) for step in json.load(f)["steps"])
        feed = FeedReader(d.control_port, "cell1")
        sim, report = run_sim(d, tmp, "--cycles", "4", "--speed", "4", "--seed", "8", "--timeout-ms", "100", "--declare-payload",
                              "--payload", str(2 * part))
        sim.wait(timeout=120)
        time.sleep(0.3)  # the last feed push
        feed.close()
        with open(report) as f:
            r = json.load(f)
        stops = [s for s in r["stops"] if s["reason"] == "STOP reply"]
        check(r["timeouts"] == 0, "no reply missed the robot's timeout (%d)" % r["timeouts"])
        check(len(stops) == 0, "4 cycles with a declared part of %.1f kg (reference %.1f kg): %d stops" % (2 * part, part, len(stops)))
        # The feed the panel draws: the detector matches the torque less the arm model and the part,
        # yet the reference and its limits come in the robot's own units, around the measured torque.
        judged = [(p["signal"][j], p["reference"][j], p["lower"][j], p["upper"][j]) for p in feed.points for j in (1, 2)
                  if p["reference"][j] is not None]
        check(len(judged) > 1000, "feed points with a judged reference: %d of %d" % (len(judged), 2 * len(feed.points)))
        check(all(lo is not None and hi is not None and lo < ref < hi for _, ref, lo, hi in judged),
              "every judged reference lies strictly between its limits")
        off = sorted(abs(sig - ref) for sig, ref, _, _ in judged)
        band = sorted(min(hi - ref, ref - lo) for _, ref, lo, hi in judged)
        inside = sum(lo <= sig <= hi for sig, _, lo, hi in judged) / len(judged)
        level = sorted(abs(sig) for sig, _, _, _ in judged)
        median = lambda v: v[len(v) // 2]
        # (A reference sent in the matched signal's units, near 0, would be off by about |signal|,
        # several times the limits: the last comparison keeps the check able to tell.)
        check(median(band) > 0 and median(off) < median(band) and median(level) > 3 * median(band) and inside > 0.95,
              "joints 2-3 in the feed: median |signal - reference| %.3f Nm, median narrower side of the limits %.3f Nm, "
              "median |signal| %.2f Nm, signal within the limits %.4f" % (median(off), median(band), median(level), inside))
        ref = d.call({"cmd": "reference", "robot": "cell1"})["reference"]
        check(ref.get("matched", "").startswith("the torque less the arm model fitted on") and "declared payload" in ref["matched"],
              "the reference answer says what is matched: %s" % ref.get("matched"))
        # A dry run of the task (the same program, no part): the daemon fits the arm's own dynamics to
        # it and calibrates a profile on the deviation from them (calibrate --dry-run, issue 6).
        d.ctl("mode", "cell1", "shadow")
        sim, report = run_sim(d, tmp, "--cycles", "14", "--speed", "8", "--seed", "9", "--timeout-ms", "100", "--declare-payload",
                              "--payload", "0")
        d.ctl("wait", "cell1", "--cycle", "1", "--timeout", "30")
        d.ctl("record-start", "cell1")
        d.ctl("wait", "cell1", "--cycle", "13", "--timeout", "120")
        dry = json.loads(d.ctl("--json", "record-stop", "cell1").stdout)
        sim.wait(timeout=120)
        check(dry["cycles"] >= 10, "dry run recorded: %d complete cycles" % dry["cycles"])
        r = d.ctl("--json", "calibrate", "cell1", "--recording", str(rec["id"]), "--dry-run", str(rec["id"] + 1000), check_rc=False)
        check(r.returncode != 0 and "dry run %d: recording %d does not exist" % (rec["id"] + 1000, rec["id"] + 1000) in r.stderr,
              "a dry run that does not exist is refused by id: %s" % r.stderr.strip())
        cal = json.loads(d.ctl("--json", "calibrate", "cell1", "--recording", str(rec["id"]), "--dry-run", str(dry["id"]),
                               "--reference-cycles", "3", "--activate", "--timeout", "300").stdout)
        arm = cal["summary"].get("arm_model", {})
        check(arm.get("dry_run") == dry["id"] and arm.get("samples", 0) > 1000,
              "the profile matches the deviation from the arm model fitted on dry run %s (%s samples, derivatives of order %s over %s)" %
              (arm.get("dry_run"), arm.get("samples"), arm.get("causal_order"), arm.get("causal_samples")))
        # The task turns the wrist with the base: the arm model cannot tell joints 1 and 6 apart and the
        # summary says so; an excitation run (each joint alone) fitted with the dry run tells them apart.
        pairs = [p["joints"] for p in arm.get("dependent_joints", [])]
        check(pairs == [[1, 6]], "the summary names the joints the dry run always moves together: %s" % pairs)
        r = d.ctl("--json", "calibrate", "cell1", "--recording", str(rec["id"]), "--dry-run", str(rec["id"]), check_rc=False)
        check(r.returncode != 0 and "dry run %d is the task's recording itself" % rec["id"] in r.stderr,
              "the task's recording as its own dry run is refused: %s" % r.stderr.strip())
        r = d.ctl("--json", "calibrate", "cell1", "--recording", str(rec["id"]), "--dry-run", str(dry["id"]), "--excitation",
                  str(dry["id"]), check_rc=False)
        check(r.returncode != 0 and "excitation run %d is the dry run itself" % dry["id"] in r.stderr,
              "the dry run as its own excitation run is refused: %s" % r.stderr.strip())
        r = d.ctl("--json", "call", json.dumps({"cmd": "calibrate", "robot": "cell1", "recording": rec["id"], "dry_run": dry["id"],
                                                  "no_arm": True}), check_rc=False)
        check(r.returncode != 0 and "no_arm and dry run %d exclude each other" % dry["id"] in r.stderr,
              "no_arm with a dry run is refused: %s" % r.stderr.strip())
        r = d.ctl("--json", "calibrate", "cell1", "--recording", str(rec["id"]), "--excitation", str(dry["id"]), check_rc=False)
        check(r.returncode != 0 and "an excitation run is fitted with a dry run: give dry_run too" in r.stderr,
              "an excitation run without a dry run is refused: %s" % r.stderr.strip())
        excitation_task = os.path.join(tmp, "excitation-task.json")
        subprocess.run([sys.executable, os.path.join(SOURCE, "tools", "excitation_task.py"), TASK, ROBOT, excitation_task], check=True)
        # (the robot's cycle counter still shows the dry run's last cycle until the new link's first
        # sample: wait for the old link to close and the new one to send)
        d.ctl("wait", "cell1", "--state", "disconnected", "--timeout", "20")
        sim, report = run_sim(d, tmp, "--cycles", "4", "--speed", "8", "--seed", "11", "--timeout-ms", "100", "--declare-payload",
                              "--payload", "0", task=excitation_task)
        d.ctl("wait", "cell1", "--state", "connected", "--timeout", "30")
        time.sleep(1.0)  # samples arrive every 0.5 ms at 8x; the first one sets the counter to 1
        d.ctl("wait", "cell1", "--cycle", "1", "--timeout", "30")
        d.ctl("record-start", "cell1")
        d.ctl("wait", "cell1", "--cycle", "4", "--timeout", "120")
        excitation = json.loads(d.ctl("--json", "record-stop", "cell1").stdout)
        sim.wait(timeout=120)
        cal = json.loads(d.ctl("--json", "calibrate", "cell1", "--recording", str(rec["id"]), "--dry-run", str(dry["id"]),
                               "--excitation", str(excitation["id"]), "--reference-cycles", "3", "--activate", "--timeout", "300").stdout)
        arm = cal["summary"].get("arm_model", {})
        check(excitation["cycles"] >= 2 and arm.get("excitation") == excitation["id"] and arm.get("dependent_joints") == [],
              "with excitation run %s (%d cycles) no joints are left that move together: %s" %
              (arm.get("excitation"), excitation["cycles"], arm.get("dependent_joints")))
        d.ctl("mode", "cell1", "detect")
        sim, report = run_sim(d, tmp, "--cycles", "4", "--speed", "4", "--seed", "10", "--timeout-ms", "100", "--declare-payload")
        sim.wait(timeout=120)
        with open(report) as f:
            r = json.load(f)
        stops = [s for s in r["stops"] if s["reason"] == "STOP reply"]
        check(r["timeouts"] == 0 and len(stops) == 0,
              "4 cycles of the task on the arm-deviation profile: %d stops, %d replies late" % (len(stops), r["timeouts"]))
    finally:
        d.stop()


def run_sim(d, out_dir, *args, task=TASK, robot=ROBOT, vendor=("ur", "cell1", "0.004")):
    """The simulated robot's task against the daemon; `vendor` = (vendor, robot id, period in s or None for the vendor's)."""
    report = os.path.join(out_dir, "sim-report.json")
    log = open(os.path.join(out_dir, "sim.log"), "w")
    name, rid, period = vendor
    p = subprocess.Popen([SIM, "run", "--robot", robot, "--task", task, "--connect", "127.0.0.1:%d" % d.robot_port,
                          "--vendor", name, "--id", rid, *(["--period", period] if period else []), "--report", report, *args],
                         stdout=log, stderr=subprocess.STDOUT)
    return p, report


def test_detect(tmp):
    d = Daemon(tmp, [UR])
    try:
        # The robot-side timeout is 100 ms here, not the vendor default of 20 ms: this test checks the
        # path robot -> daemon -> robot, and the shared 2-core CI machine has stalled a process for
        # over 20 ms (one reply in 63,437 arrived after 21 ms, with the daemon's own decision on time).
        # Latency is measured by the load benchmark; the timeout itself by test_kill9.
        # Contacts come in 10 of cycles 22-33. Calibration takes 5-15 s of wall time (10-15 s on a
        # loaded machine), in which the simulated robot runs 4-9 cycles (1.5 s each at speed 4)
        # past the recording's end at cycle 16, so the first contacts may come
        # before detection is switched on: only those after it are judged (below). Until
        # 2026-11-25 all contacts came in cycles 19-22, and on a loaded machine the test failed
        # with every one of them before the switch.
        sim, report = run_sim(d, tmp, "--cycles", "34", "--speed", "4", "--contacts", "10", "--contacts-from-cycle", "22",
                              "--min-force", "200", "--max-force", "300", "--seed", "5", "--timeout-ms", "100")
        d.ctl("wait", "cell1", "--state", "idle", "--timeout", "20")
        d.ctl("wait", "cell1", "--cycle", "1", "--timeout", "20")
        d.ctl("record-start", "cell1")
        d.ctl("wait", "cell1", "--cycle", "16", "--timeout", "90")
        rec = json.loads(d.ctl("--json", "record-stop", "cell1").stdout)
        check(rec["cycles"] >= 14, "recording committed with %d complete cycles, %d samples" % (rec["cycles"], rec["samples"]))
        # This test checks the path robot -> daemon -> robot, not detection quality (the benchmark suite
        # measures that): the default detector as a user calibrates it (3 reference cycles, >= 10
        # nominal ones), and large collisions (200-300 N). (It used the published rules with
        # deliberately insensitive thresholds, k = 20 and margin 3, until 2026-11-25: their
        # eigenvalue limit was passed by 1.022 against 0.993, so a recording started a few samples
        # differently on a loaded machine missed all three collisions.)
        cal = json.loads(d.ctl("--json", "calibrate", "cell1", "--reference-cycles", "3", "--activate").stdout)
        check(cal["summary"]["detector"] == "phase-aware" and len(cal["summary"]["thresholds"]) == 6,
              "calibrated profile %d (%s detector) activated" % (cal["profile"], cal["summary"]["detector"]))
        widest = cal["summary"]["phase_aware"]["derivation"].get("widest_cycles", [])
        check(len(widest) >= 3 and all(5 <= c["cycle"] <= 16 for c in widest) and
              widest[0]["cusum"] == max(cal["summary"]["phase_aware"]["derivation"]["cusum_cycle_maxima"]),
              "the calibration names the recorded cycles that set its limits (cycles after the 3 reference cycles): %s" %
              [(c["cycle"], round(c["ratio"], 2), round(c["cusum"], 2)) for c in widest])
        armed = json.loads(d.ctl("--json", "mode", "cell1", "detect").stdout)
        # The detector judges once its window has filled after the switch (30 samples of 4 ms).
        armed_t = armed["robot_time"] + 30 * 0.004
        # The operator: every stop is resumed a moment later, so the run ends with its last cycle.
        # (A stop left alone holds the simulated robot until it gives up at three times its
        # program's length: about 115 s of this test's wall time went to waiting for that.)
        resumed = 0
        give_up = time.time() + 300
        while sim.poll() is None and time.time() < give_up:
            if "STOPPED" in d.ctl("status", "cell1").stdout:
                time.sleep(0.5)
                resumed += d.ctl("resume", "cell1", "--operator", "daemon-live-test", check_rc=False).returncode == 0
            time.sleep(0.2)
        finished = sim.poll() is not None
        check(finished, "the simulated robot finished its cycles with every stop resumed (%d stops resumed)" % resumed)
        if not finished:
            sim.kill()
            return
        with open(report) as f:
            r = json.load(f)
        truth = r["evaluation"]["summary"]
        stops = [s for s in r["stops"] if s["reason"] == "STOP reply"]
        # First: a missed reply makes the robot hold itself, and then no collision can be stopped by a reply.
        check(r["timeouts"] == 0, "no reply missed the robot's 100 ms timeout (%d)" % r["timeouts"])
        check(len(stops) >= 1, "the daemon stopped the robot %d time(s)" % len(stops))
        print("collisions %d, detected %d, false stop events %d; detection armed at t = %.3f s" %
              (truth["collisions"], truth["detected"], truth["false_stop_events"], armed_t))
        judged = [c for c in truth["collision_details"] if c["onset_t"] >= armed_t]
        check(len(judged) >= 1, "%d of %d collisions began after detection was armed" % (len(judged), truth["collisions"]))
        if not judged:
            return
        first = judged[0]
        check(first["detected"], "first judged collision (t = %.3f s, %.0f N on link %d) detected after %s ms" %
              (first["onset_t"], first["peak_force"], first["link"], "%.1f" % (first["delay"] * 1e3) if first["detected"] else "-"))
        # With every stop resumed, each later collision meets a moving robot too: 200-300 N impacts,
        # which the suite's default detector finds every time (docs/benchmarks.md, >= 200 N).
        found = sum(1 for c in judged if c["detected"])
        check(found == len(judged), "%d of the %d collisions after the switch detected (200-300 N)" % (found, len(judged)))
        # And no stop without a collision. This robot declares no payload, and this profile's
        # reference reads 0.6 Nm higher on joint 2 in the 10 samples before the part's release than
        # in the 20 before them: until 2026-11-28 the partner stayed short of the release step in 1
        # or 2 of about 5 releases per run (8 false stop events in 10 runs; docs/detection.md, step 1).
        check(truth["false_stop_events"] == 0, "no stop without a collision (%d)" % truth["false_stop_events"])
        if stops:
            # The first stop is a collision's detection: usually the first judged one's, but on a
            # loaded machine the calibration can take long enough that detection is switched on
            # while an earlier contact still presses (measured: switched on at t = 123.063 s, joint 3
            # 74 Nm off, the stop at 123.062 s, the first judged onset at 137.186 s). Within 0.5 s of
            # the onset, unless the contact began before the switch.
            cause = [c for c in truth["collision_details"] if c["detected"] and abs(c["onset_t"] + c["delay"] - stops[0]["t"]) < 1e-3]
            check(len(cause) == 1 and 0 <= cause[0]["delay"] and (cause[0]["onset_t"] < armed_t or cause[0]["delay"] < 0.5),
                  "the first stop (t = %.3f s) is a collision's detection (onset %s)" %
                  (stops[0]["t"], "t = %.3f s, %.0f N, after %.1f ms" % (cause[0]["onset_t"], cause[0]["peak_force"], cause[0]["delay"] * 1e3)
                   if cause else "none found"))
        print("reply latency median %.3f ms, p99 %.3f ms, max %.3f ms" % (r["latency_median_ms"], r["latency_p99_ms"], r["latency_max_ms"]))
        ev = d.call({"cmd": "events", "robot": "cell1", "kind": "stop"})["events"]
        check(len(ev) >= 1 and ev[0]["has_evidence"], "stop event stored with evidence: %s" % (ev[0]["reason"] if ev else "none"))
        full = d.call({"cmd": "event", "id": ev[0]["id"]})
        joints = full["evidence"]["joints"]
        check(len(joints) == 6 and len(joints[0]["window"]) == 30 and len(joints[0]["reference"]) >= 1,
              "evidence holds every joint's window (30 samples) and matched reference span")
        check(ev[0]["value"] > ev[0]["threshold"] > 0,
              "the stop's value %.4g exceeds its threshold %.4g (%s)" % (ev[0]["value"], ev[0]["threshold"], ev[0]["rule"]))
        # The phase-aware thresholds along each matched span, as the profile holds them per reference
        # sample (the evidence dialog draws them): one per span sample, the profile's own values.
        phase = d.call({"cmd": "reference", "robot": "cell1"})["reference"]["phase_theta1"]
        spans_ok = all(len(jj["theta1_span"]) == len(jj["reference"]) and
                       jj["theta1_span"] == phase[jj["joint"] - 1][jj["ref_start"]:jj["ref_start"] + len(jj["reference"])]
                       for jj in joints)
        varying = sum(len(set(jj["theta1_span"])) > 1 for jj in joints)
        check(spans_ok, "the evidence's thresholds along each matched span are the profile's per-phase ones "
                        "(%d of 6 joints' spans cross more than one threshold)" % varying)
        # The newest samples as judged (what the dashboard drew up to the stop, the evidence dialog's
        # charts): a window's length of them, each joint's reference inside its limits, and for a stop
        # by the ratio rule the stop joint's last sample beyond a limit by what the stop's value is
        # over its threshold.
        jt = full["evidence"].get("judged_t", [])
        check(len(jt) == 30 and all(b > a for a, b in zip(jt, jt[1:])),
              "the evidence holds the newest %d samples as judged, in time order" % len(jt))
        lengths_ok = all(len(jj["judged"][k]) == len(jt) for jj in joints for k in ("signal", "reference", "lower", "upper"))
        judged_points = [(lo, r, hi) for jj in joints for lo, r, hi in zip(jj["judged"]["lower"], jj["judged"]["reference"], jj["judged"]["upper"])
                         if r is not None]
        check(lengths_ok and len(judged_points) >= 6 * 25 and all(lo <= r <= hi for lo, r, hi in judged_points),
              "every joint's judged samples carry a reference inside its limits (%d of %d judged)" % (len(judged_points), 6 * len(jt)))
        # This robot has no kinematic model and declares no payload, so the detector matches
        # the torque as recorded and the judged samples are the window itself (the same newest
        # samples, the stop's last).
        matched = full["evidence"].get("matched", "")
        check(matched == "the torque as recorded" and all(jj["judged"]["signal"] == jj["window"] for jj in joints),
              "the judged samples are the evidence window's samples, the stop's the last (matched: %s)" % matched)
        sj = joints[ev[0]["joint"] - 1]["judged"]
        x, lo, hi = sj["signal"][-1], sj["lower"][-1], sj["upper"][-1]
        beyond = x - hi if x > hi else lo - x
        print("stop on joint %d by %s: last sample %.4g, limits %.4g .. %.4g, beyond by %.4g; value %.4g - threshold %.4g = %.4g" %
              (ev[0]["joint"], ev[0]["rule"], x, lo, hi, beyond, ev[0]["value"], ev[0]["threshold"], ev[0]["value"] - ev[0]["threshold"]))
        # The command line shows the same: the stop joint's row carries the stop's value in the
        # stopping rule's column, marked over, and the newest sample against its limits.
        shown = d.ctl("event", str(ev[0]["id"])).stdout
        print(shown)
        line = next((l for l in shown.splitlines() if l.split()[:1] == [str(ev[0]["joint"])]), "")
        value = re.escape("%.4g" % ev[0]["value"])
        pattern = (r"^\d+\s+\S+\s+\S+\s+\S+(?: over)?\s+%s over\s" if ev[0]["rule"] == "accumulated" else r"^\d+\s+%s\s+\S+\s+\S+ over\s") % value
        check(re.match(pattern, line) is not None and "%.4g" % x in line.split(),
              "'warpguard ctl event' shows the stop joint's %s %.4g, marked over, and its newest sample %.4g: %s" %
              (ev[0]["rule"], ev[0]["value"], x, line))
        if ev[0]["rule"] == "rule1":
            check(beyond > 0 and abs(beyond - (ev[0]["value"] - ev[0]["threshold"])) <= 1e-6 * max(1.0, abs(x)),
                  "the stop joint's last judged sample lies beyond its limits by the stop's excess over its threshold")
    finally:
        d.stop()


def test_kill9(tmp):
    d = Daemon(tmp, [UR])
    sim = None
    try:
        sim, report = run_sim(d, tmp, "--cycles", "4", "--speed", "1")
        d.ctl("wait", "cell1", "--state", "idle", "--timeout", "20")
        d.ctl("record-start", "cell1")
        time.sleep(1.0)
        rec = json.loads(d.ctl("--json", "record-stop", "cell1").stdout)
        before = d.call({"cmd": "events", "limit": 1000})["events"]
        recordings = d.call({"cmd": "recordings"})["recordings"]
        time.sleep(0.5)
        killed = time.time()
        d.proc.send_signal(signal.SIGKILL)
        d.proc.wait()
        time.sleep(1.5)
        # Restart on the same ports and data: the robot reconnects and must stay stopped.
        d.start(d.robot_port, d.control_port)
        after = d.call({"cmd": "events", "limit": 1000})["events"]
        ids_after = {e["id"] for e in after}
        check(all(e["id"] in ids_after for e in before), "all %d events committed before kill -9 are there after the restart" % len(before))
        check(d.call({"cmd": "recordings"})["recordings"] == recordings, "recording %d survived kill -9 (%d samples)" % (rec["id"], rec["samples"]))
        check(os.path.getsize(rec["path"]) > 1000, "its CSV file is on disk")
        d.ctl("wait", "cell1", "--state", "stopped", "--timeout", "10")
        st = d.call({"cmd": "robot", "robot": "cell1"})
        check(st["connected"] and st["latched"] and "reconnected while stopped" in st["reason"],
              "the robot reconnected and stays stopped: %s" % st["reason"])
        time.sleep(0.5)
        d.ctl("resume", "cell1", "--operator", "integration-test")
        sim.wait(timeout=120)
        with open(report) as f:
            r = json.load(f)
        lost = [s for s in r["stops"] if s["wall"] >= killed - 0.01]
        check(len(lost) >= 1, "the robot stopped by itself after the daemon died: %s" % (lost[0]["reason"] if lost else "no stop"))
        if lost:
            delay = lost[0]["wall"] - killed
            check(delay <= 0.020 + 0.004 + 0.030, "... %.1f ms after kill -9 (robot timeout 20 ms + one 4 ms period + 30 ms scheduling)" % (delay * 1e3))
        check(len(r["resumes"]) == 1 and r["resumes"][0] > lost[0]["t"], "it moved again only after the API's resume")
    finally:
        if sim and sim.poll() is None:
            sim.kill()
        if d.proc.poll() is None:
            d.stop()


def test_interrupted(tmp):
    """A robot that stops itself while the daemon records it (the PC silent for longer than the robot's
    timeout): it reconnects held, the operator resumes it, the recording goes on, and calibration cuts
    the reference from an unbroken run and learns the thresholds without the standing robot, saying so."""
    d = Daemon(tmp, [UR])
    sim = None
    try:
        sim, report = run_sim(d, tmp, "--cycles", "20", "--speed", "8", "--seed", "9", "--timeout-ms", "100")
        d.ctl("wait", "cell1", "--state", "idle", "--timeout", "20")
        d.ctl("wait", "cell1", "--cycle", "1", "--timeout", "30")
        d.ctl("record-start", "cell1")
        d.ctl("wait", "cell1", "--cycle", "3", "--timeout", "60")
        time.sleep(0.2)
        d.proc.send_signal(signal.SIGSTOP)  # the PC goes silent for 0.4 s, the robot's timeout is 0.1 s
        time.sleep(0.4)
        d.proc.send_signal(signal.SIGCONT)
        d.ctl("wait", "cell1", "--state", "stopped", "--timeout", "10")
        st = d.call({"cmd": "robot", "robot": "cell1"})
        check("reconnected while stopped" in st["reason"], "the robot stopped itself and came back held: %s" % st["reason"])
        time.sleep(0.5)
        d.ctl("resume", "cell1", "--operator", "integration-test")
        d.ctl("wait", "cell1", "--cycle", "18", "--timeout", "120")
        rec = json.loads(d.ctl("--json", "record-stop", "cell1").stdout)
        modes = []
        with open(rec["path"]) as f:
            rows = (line for line in f if not line.startswith("#"))
            column = next(rows).strip().split(",").index("mode")
            modes = [int(line.split(",")[column]) for line in rows]
        held = [i for i, m in enumerate(modes) if m & 1]
        check(len(held) > 50 and all(modes[i] & 2 for i in held[:1]),
              "the recording holds %d samples of the robot standing held, the first marked self-stopped" % len(held))
        cal = json.loads(d.ctl("--json", "calibrate", "cell1", "--reference-cycles", "3", "--timeout", "300").stdout)
        record = cal["summary"].get("interruptions", {})
        listed = record.get("list", [])
        check(any("robot held for" in i["what"] and i["row"] == held[0] for i in listed),
              "calibration names the hold at row %d: %s" % (held[0], [i["what"] for i in listed]))
        begin, end = record.get("reference_run", [0, 0])
        check(end - begin > 1000 and not any(begin <= i < end for i in held),
              "the reference comes from the run at rows %d-%d, none of them held (held rows %d-%d)" % (begin, end - 1, held[0], held[-1]))
        check("unbroken run(s)" in record.get("note", ""), "... and says so: %s" % record.get("note", "")[:160])
        nominal = cal["summary"]["nominal_cycles"]
        covered = cal["summary"]["reference_coverage"]["cycles"]
        check(nominal >= 10 and covered == nominal,
              "%d nominal cycles for the thresholds, all of them (every run's) checked for coverage by the reference: %d" % (nominal, covered))
    finally:
        if sim and sim.poll() is None:
            sim.kill()
        if d.proc.poll() is None:
            d.proc.send_signal(signal.SIGCONT)
            d.stop()


def test_identify(tmp):
    """The identification procedure through the daemon (PROTOCOL.md §5) for each vendor's link:
    armed through the control API, the simulated controller reports the tracked point, the daemon
    identifies and stores the model; the stored model reproduces MuJoCo's forward kinematics."""
    robots = [("ur5e-like", "ur", "cell-ur"), ("irb120-like", "abb", "cell-abb"), ("vp6242-like", "denso", "cell-denso"),
              ("../held-out/hs045-like", "denso", "cell-scara")]
    # The SCARA's joint 3 is a quill: configured linear, its position sent in mm beside degrees (as
    # Denso's ASCII lines and, for its sample stream below, as ABB's binary frames: cell-scara-abb).
    scara = {"unit": "percent", "joints": 4, "linear": [3]}
    d = Daemon(tmp, [dict({"id": rid, "address": "127.0.0.1", "vendor": vendor, "signal": "torque", "unit": "Nm", "joints": 6},
                          **(scara if rid.startswith("cell-scara") else {}))
                     for _, vendor, rid in robots + [("", "abb", "cell-scara-abb")]])
    try:
        # Identification and calibration threads: nice 0 behind real-time robot links (they preempt
        # them anyway), nice 19 when the links run at normal scheduling (then the work must yield).
        startup = []
        for _ in range(100):  # written once the link threads have tried, after the ready file
            startup = [l for l in d.log().splitlines() if "robot link threads" in l]
            if startup:
                break
            time.sleep(0.02)
        check(len(startup) == 1 and (("SCHED_FIFO priority 20; calibration and identification at nice 0" in startup[0]) or
                                     ("cannot run at SCHED_FIFO" in startup[0] and "at nice 19" in startup[0])),
              "the background work's nice value follows the links' scheduling: %s" % startup)
        # Not armed: the link is refused with STOP and the log says how to arm it.
        s = robot_link(d.robot_port)
        s.sendall(b"WG1;cell-ur;ur;torque;Nm;6;rad;2;20;ident\n")
        check(read_exact(s, 4) == b"\x00\x00\x00\x01", "an identification link that was not armed gets STOP")
        s.close()
        time.sleep(0.2)
        check("the procedure is not armed (warpguard ctl identify-start cell-ur)" in d.log(),
              "... and the log says how to arm it")
        # A malformed line fails the procedure with the field named, and nothing is stored.
        d.ctl("identify-start", "cell-ur")
        s = robot_link(d.robot_port)
        s.sendall(b"WG1;cell-ur;ur;torque;Nm;6;rad;2;20;ident\n")
        check(read_exact(s, 4) == b"\x00\x00\x00\x00", "an armed identification link gets CONTINUE")
        s.sendall(b"IQ;1;0;0;zero;0;0;0\n")
        check(read_exact(s, 4) == b"\x00\x00\x00\x01", "a malformed identification line gets STOP")
        s.close()
        st = d.call({"cmd": "identification", "robot": "cell-ur"})
        check(st["state"] == "failed" and "q3 is 'zero'" in st["result"]["error"],
              "... the procedure failed naming the field: %s" % st.get("result"))
        check("latest_model" not in st, "... and no model was stored")
        no_model = d.ctl("calibrate", "cell-ur", "--method", "ka-mdtw", check_rc=False)
        check(no_model.returncode != 0 and "has no kinematic model" in no_model.stderr,
              "KA-mDTW calibration without a model is refused: %s" % no_model.stderr.strip())

        for name, vendor, rid in robots:
            desc = os.path.join(SOURCE, "samples", "robots", name + ".json")
            d.ctl("identify-start", rid)
            p = subprocess.run([SIM, "identify", "--robot", desc, "--connect", "127.0.0.1:%d" % d.robot_port, "--vendor", vendor,
                                "--id", rid, "--noise-mm", "0.05", "--seed", "5"], capture_output=True, text=True, timeout=120)
            check(p.returncode == 0, "%s: the simulated controller reported its points over the %s link: %s" %
                  (name, vendor, (p.stdout + p.stderr).strip()))
            st = {}
            for _ in range(300):
                st = d.call({"cmd": "identification", "robot": rid})
                if st["state"] in ("done", "failed"):
                    break
                time.sleep(0.05)
            check(st["state"] == "done", "%s: identified (%s, %d points)" % (name, st["state"], st["points"]))
            if st["state"] != "done":
                continue
            model_path = os.path.join(tmp, rid + "-model.json")
            with open(model_path, "w") as f:
                json.dump(st["latest_model"]["model"], f)
            checks_csv = os.path.join(tmp, rid + "-check.csv")
            subprocess.run([SIM, "identify", "--robot", desc, "--out", os.path.join(tmp, "unused.csv"), "--check-out", checks_csv,
                            "--check-count", "1000"], check=True, capture_output=True, timeout=120)
            c = subprocess.run([CLI, "identify", "check", "--model", model_path, "--points", checks_csv, "--max-mm", "0.5"],
                               capture_output=True, text=True, timeout=60)
            check(c.returncode == 0, "%s: the stored model reproduces MuJoCo's FK over 1,000 configurations within 0.5 mm: %s" %
                  (name, c.stdout.strip()))
        with open(os.path.join(tmp, "cell-scara-model.json")) as f:
            types = [j["type"] for j in json.load(f)["joints"]]
        check(types == ["revolute", "revolute", "prismatic", "revolute"], "the SCARA's quill is identified as prismatic: %s" % types)
        # An identification link that does not declare the quill linear is refused, naming both sides.
        d.ctl("identify-start", "cell-scara")
        s = robot_link(d.robot_port)
        s.sendall(b"WG1;cell-scara;denso;torque;Nm;4;deg;8;150;ident\n")
        check(read_exact(s, 2) == b"1\n", "a SCARA identification link without 'linear=3' gets STOP")
        s.close()
        time.sleep(0.2)
        check("declares linear joints none but the robot is configured with 3" in d.log(), "... and the log says why")
        # Its sample stream: the simulated SCARA sends the quill in mm, in Denso's lines and ABB's binary
        # frames; the recording holds m.
        desc = os.path.join(SOURCE, "samples", "held-out", "hs045-like.json")
        task = os.path.join(SOURCE, "samples", "held-out", "hs045-like-electronics.json")
        for vendor, rid in (("denso", "cell-scara"), ("abb", "cell-scara-abb")):
            sim, _ = run_sim(d, tmp, "--cycles", "5", "--speed", "4", task=task, robot=desc, vendor=(vendor, rid, None))
            d.ctl("wait", rid, "--cycle", "1", "--timeout", "60")
            d.ctl("record-start", rid)
            d.ctl("wait", rid, "--cycle", "3", "--timeout", "60")
            rec = json.loads(d.ctl("--json", "record-stop", rid).stdout)
            sim.wait(timeout=120)
            with open(rec["path"]) as f:
                rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
            q3 = [float(r["q3"]) for r in rows]
            q2 = [float(r["q2"]) for r in rows]
            check(len(rows) > 200 and 0.015 < min(q3) < 0.025 and 0.115 < max(q3) < 0.125,
                  "%s: the recording holds the quill in m (the task strokes 0.02-0.12 m): %d samples, %.4f-%.4f" %
                  (vendor, len(rows), min(q3), max(q3)))
            check(0.7 < min(q2) and max(q2) < 1.6, "... and the elbow in rad: %.3f-%.3f" % (min(q2), max(q2)))
        connects = d.ctl("events", "--robot", "cell-scara", "--kind", "connect").stdout
        check("4 joints (3 linear)" in connects, "the connection event names the linear joint: %s" % connects.strip().splitlines()[-1:])
        events = d.ctl("events", "--robot", "cell-denso", "--kind", "identify").stdout
        check("identified from 144 points" in events, "the identification is in the event log: %s" % events.strip().splitlines()[-1:])
        # A model from elsewhere (a preset): stored, and refused when its joint count does not fit.
        bad = os.path.join(tmp, "bad-model.json")
        with open(os.path.join(tmp, "cell-ur-model.json")) as f:
            m = json.load(f)
        m["joints"] = m["joints"][:5]
        with open(bad, "w") as f:
            json.dump(m, f)
        r = d.ctl("set-model", "cell-ur", bad, check_rc=False)
        check(r.returncode != 0 and "the model has 5 joints; robot 'cell-ur' has 6" in r.stderr, "a 5-joint model is refused: %s" % r.stderr.strip())
        r = d.ctl("set-model", "cell-ur", os.path.join(tmp, "cell-ur-model.json"), check_rc=False)
        check(r.returncode == 0 and "stored for robot cell-ur" in r.stdout, "a 6-joint preset is stored: %s" % r.stdout.strip())
    finally:
        d.stop()


def test_override(tmp):
    """A robot configured to report its speed override: the handshake must say so, a bad value is a
    malformed sample, recordings carry it (as a fraction), and the detector follows the turns it reports."""
    d = Daemon(tmp, [dict(UR, override=True)])
    try:
        s = robot_link(d.robot_port)
        s.sendall(b"WG1;cell1;ur;torque;Nm;6;rad;4;20;ascii\n")
        check(read_exact(s, 4) == STOP, "a handshake without the override option for a robot configured with it answered STOP")
        s.close()
        s = robot_link(d.robot_port)
        s.sendall(b"WG1;cell1;ur;torque;Nm;6;rad;4;20;ascii;override\n")
        check(read_exact(s, 4) == CONTINUE, "the handshake with the option answered CONTINUE")
        s.sendall(b"0;0;0;0.0;1;1;1;1;1;1;0;0;0;0;0;0;170\n")
        check(read_exact(s, 4) == STOP, "an override of 170 % answered STOP")
        s.close()
        time.sleep(0.1)
        check("its samples do not report the speed override but the robot is configured with it" in d.log(), "override mismatch logged")
        check("field override is '170'; expected a speed override from 0 to 100 percent" in d.log(), "the bad override logged: field and value")
        d.ctl("resume", "cell1", "--operator", "integration-test")
        # The script the panel's wizard gets from the daemon declares what the configuration requires.
        files = d.call({"cmd": "script", "robot": "cell1", "host": "127.0.0.1"})["files"]
        text = "".join(f["text"] for f in files)
        check(";ascii;override\"" in text and "get_target_speed_fraction() * 100" in text,
              "the daemon's script for the robot sends the override (%d files)" % len(files))
        # The robot's kinematic model (identified on the simulated controller): the speed model of
        # the default detector comes with the arm model calibration fits with it.
        identify_and_store_model(d, tmp)
        rec = record_task(d, tmp, "--report-override")
        with open(rec["path"]) as f:
            rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
        check(len(rows) > 1000 and set(r["override"] for r in rows) == {"1"},
              "the recording carries the reported override, 100 %%: %d rows, values %s" % (len(rows), sorted(set(r["override"] for r in rows))[:5]))
        cal = json.loads(d.ctl("--json", "calibrate", "cell1", "--reference-cycles", "3", "--activate", "--timeout", "300").stdout)
        check(cal["summary"].get("reference_override") == 1.0,
              "the profile keeps the override its reference ran at: %s" % cal["summary"].get("reference_override"))
        # SHADOW: the detector judges every sample and follows the speed, the robot is not stopped.
        # The operator turns the slider three times during six cycles (the simulated controller
        # follows each over its ramp). The estimate is read while the robot is still connected,
        # more than 6 s after the last turn (the detector's ability to keep the robot running
        # through turns is measured offline: docs/detection.md and the sim tests).
        d.ctl("mode", "cell1", "shadow")
        sim, report = run_sim(d, tmp, "--cycles", "6", "--speed", "4", "--seed", "8", "--timeout-ms", "100", "--report-override",
                              "--override-change", "8:0.7", "--override-change", "16:1", "--override-change", "24:0.8")
        deadline = time.time() + 60
        st = d.call({"cmd": "robot", "robot": "cell1"})
        while not (st["state"] == "shadow" and st["cycle"] == 5) and time.time() < deadline:  # (the last run ended at cycle 18)
            time.sleep(0.05)
            st = d.call({"cmd": "robot", "robot": "cell1"})
        sim.wait(timeout=120)
        with open(report) as f:
            r = json.load(f)
        check(r["timeouts"] == 0 and not r["stops"], "no reply missed the robot's timeout (%d), no stop in SHADOW (%d)" % (r["timeouts"], len(r["stops"])))
        ratio = st["adaptation"]["speed_ratio"]
        check(st["adaptation"]["has_speed_model"], "the profile has a speed model")
        check(st["state"] == "shadow" and abs(ratio - 0.8) < 0.05, "the speed estimate in cycle 5, in %s: %.3f (the override 80 %%)" % (st["state"], ratio))
        # What the robot reports is recorded as it came (idle: a recording turns detection off).
        d.ctl("mode", "cell1", "idle")
        sim, report = run_sim(d, tmp, "--cycles", "3", "--speed", "8", "--seed", "9", "--timeout-ms", "100", "--report-override",
                              "--override-change", "6:0.7", "--override-change", "12:0.85")
        d.ctl("wait", "cell1", "--state", "idle", "--timeout", "20")
        d.ctl("record-start", "cell1")
        sim.wait(timeout=120)
        rec = json.loads(d.ctl("--json", "record-stop", "cell1").stdout)
        with open(rec["path"]) as f:
            values = [float(row["override"]) for row in csv.DictReader(line for line in f if not line.startswith("#"))]
        turns = [v for k, v in enumerate(values) if k == 0 or v != values[k - 1]]
        check(turns == [1.0, 0.7, 0.85], "the recording follows the slider: %s" % turns)
    finally:
        d.stop()


with tempfile.TemporaryDirectory(prefix="warpguard-it-") as tmp:
    {"refusals": test_refusals, "detect": test_detect, "kill9": test_kill9, "interrupted": test_interrupted, "identify": test_identify,
     "payload": test_payload, "override": test_override}[TEST](tmp)
    if failures:
        print("%d check(s) failed" % len(failures))
        for name in ("warpguardd.log", "sim.log"):
            path = os.path.join(tmp, name)
            if os.path.exists(path):
                print("---- " + name)
                print(open(path).read()[-4000:])
        sys.exit(1)
print("all checks passed")
