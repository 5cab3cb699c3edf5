#!/usr/bin/python3
"""One rerun of the tests that timed out in a sanitizer step (scripts/test.sh).

GCC 12's AddressSanitizer takes no allocator locks around fork(): a Criterion
child forked while another runner thread holds one waits on it forever (seen
here in about 2 of 7 sanitizer runs, in different suites, at 0% CPU: the
child's stack ends in __sanitizer::Mutex::Lock under malloc in libcriterion).
meson then kills the test at its timeout. A test that hangs because of our
own code hangs again when rerun, so one rerun of a timed-out test tells the
two apart; the rerun is printed and counted in the totals.

    scripts/test-rerun.py timeouts BUILD_DIR
        Prints the names of the tests whose result was TIMEOUT, one per line,
        and exits 0, when every test that did not pass timed out and there
        are at most MAX_RERUNS of them. Exits 1 otherwise (any other failure,
        nothing timed out, or too many timeouts for this explanation): then
        nothing is rerun and the step fails.
    scripts/test-rerun.py merge BUILD_DIR
        After the rerun: BUILD_DIR/meson-logs/testlog.json holds the rerun's
        results only and testlog-first.json the first run. Writes the
        first run's entries with each rerun test's entry replaced by its
        rerun, marked "rerun_after": "TIMEOUT" (scripts/test-totals.py lists
        them), into testlog.json.
"""
import json
import os
import sys

MAX_RERUNS = 2
PASSING = ("OK", "SKIP", "EXPECTEDFAIL")


def entries(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def short_name(full):
    """meson's "project / name" as `meson test` takes it."""
    return full.split(" / ", 1)[-1]


def timeouts(build):
    log = os.path.join(build, "meson-logs", "testlog.json")
    if not os.path.exists(log):
        print(f"no test log: {log}", file=sys.stderr)
        return 1
    bad = [e for e in entries(log) if e.get("result") not in PASSING]
    hung = [e for e in bad if e.get("result") == "TIMEOUT"]
    if not hung or len(hung) != len(bad) or len(hung) > MAX_RERUNS:
        return 1
    for e in hung:
        print(short_name(e["name"]))
    return 0


def merge(build):
    logs = os.path.join(build, "meson-logs")
    first = entries(os.path.join(logs, "testlog-first.json"))
    rerun = {e["name"]: e for e in entries(os.path.join(logs, "testlog.json"))}
    out = []
    for e in first:
        r = rerun.pop(e["name"], None)
        if r is None:
            out.append(e)
            continue
        r["rerun_after"] = e.get("result", "")
        r["first_duration"] = e.get("duration")
        out.append(r)
    if rerun:  # a rerun of a test the first run did not have: keep it, visibly
        for r in rerun.values():
            r["rerun_after"] = "NOT IN FIRST RUN"
            out.append(r)
    tmp = os.path.join(logs, "testlog.json.tmp")
    with open(tmp, "w") as f:
        for e in out:
            f.write(json.dumps(e) + "\n")
    os.replace(tmp, os.path.join(logs, "testlog.json"))
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("timeouts", "merge"):
        sys.exit("usage: scripts/test-rerun.py timeouts|merge BUILD_DIR")
    sys.exit((timeouts if sys.argv[1] == "timeouts" else merge)(sys.argv[2]))
