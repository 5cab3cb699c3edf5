#!/usr/bin/python3
"""Totals of the test runs in one or more meson build directories, counted
test case by test case: scripts/test.sh prints them after its steps.

    scripts/test-totals.py BUILD_DIR...

Reads BUILD_DIR/meson-logs/testlog.json. A test that speaks TAP (the
Criterion executables with --tap=-, the Python unittest files) counts each of
its cases: "ok" passed, "ok ... # SKIP reason" skipped, "not ok" failed; a
TAP test whose run meson judged bad (crash, timeout, a plan that does not
add up) although no case failed counts one more failure. Any other test
counts once by meson's result; the reason of its skip is its line starting
with "SKIP" (or its last line of output). A test without TAP that passed but
printed lines starting with "SKIP" (a part it could not run, e.g. "SKIP
other-user checks: not root") counts one skipped case more per such line, so
that a part skipped inside a passing test is listed too. A Criterion
executable that does not speak TAP counts as a failure (its skipped cases
would be hidden).

Prints "tests: P passed, F failed, S skipped", then every skipped case with
its reason (grouped by reason), every test that was rerun after a timeout
(scripts/test-rerun.py: the entry is the rerun's, marked "rerun_after"; its
cases count by the rerun) and every failed case. Exit status 0.
"""
import json
import os
import re
import sys

TAP_LINE = re.compile(r"^(not ok|ok)\b\s*(\d+)?\s*(?:-\s*)?(.*)$")
TAP_HEADER = re.compile(r"^(TAP version \d+|\d+\.\.\d+)\s*$", re.M)


def tap_cases(text):
    """(result, name, reason) of each TAP result line in text."""
    cases = []
    for line in text.splitlines():
        m = TAP_LINE.match(line)
        if not m:
            continue
        status, rest = m.group(1), m.group(3)
        name, _, directive = rest.partition("#")
        name = re.sub(r"\s*\(\d+(\.\d+)?s\)\s*$", "", name.strip())
        d = directive.strip()
        if status == "ok" and d[:4].upper() == "SKIP":
            cases.append(("skip", name, d[4:].strip(" :") or "no reason given"))
        elif status == "ok":
            cases.append(("pass", name, ""))
        elif d[:4].upper() == "TODO":
            cases.append(("pass", name, ""))  # expected failure
        else:
            cases.append(("fail", name, d))
    return cases


def skip_reason(entry):
    out = (entry.get("stdout") or "") + "\n" + (entry.get("stderr") or "")
    lines = [l.strip() for l in out.splitlines() if l.strip()]
    for l in lines:
        if l.startswith("SKIP"):
            why = re.sub(r"^SKIP[:\s]*", "", l)
            head, sep, rest = why.partition(": ")
            # "SKIP load: reason" of the test stress-load: the reason alone
            return rest if sep and entry["name"].endswith(head) else why
    return lines[-1] if lines else "no reason given"


def partial_skips(entry):
    """Reasons of the "SKIP ..." lines of a passing test without TAP."""
    out = (entry.get("stdout") or "") + "\n" + (entry.get("stderr") or "")
    return [re.sub(r"^SKIP[:\s]*", "", l.strip()) or "no reason given"
            for l in out.splitlines() if re.match(r"^SKIP\b", l.strip())]


def main(dirs):
    passed = failed = 0
    skips = {}   # reason -> [where]
    fails = []
    reruns = []
    for d in dirs:
        log = os.path.join(d, "meson-logs", "testlog.json")
        if not os.path.exists(log):
            fails.append(f"{d}: no test log ({log})")
            failed += 1
            continue
        tag = os.path.basename(os.path.normpath(d))
        for line in open(log):
            e = json.loads(line)
            name, res = e["name"], e.get("result", "")
            stdout = e.get("stdout") or ""
            if e.get("rerun_after"):
                first = e.get("first_duration")
                took = f" after {first:.0f} s" if isinstance(first, (int, float)) else ""
                reruns.append(f"{tag} {name}: first run {e['rerun_after']}{took}, rerun {res}")
            if TAP_HEADER.search(stdout):
                cases = tap_cases(stdout)
                for r, case, why in cases:
                    if r == "pass":
                        passed += 1
                    elif r == "skip":
                        skips.setdefault(why, []).append(f"{tag} {name}: {case}")
                    else:
                        failed += 1
                        fails.append(f"{tag} {name}: {case} {why}".rstrip())
                bad = res not in ("OK", "SKIP", "EXPECTEDFAIL")
                if bad and not any(r == "fail" for r, _, _ in cases):
                    failed += 1
                    fails.append(f"{tag} {name}: meson says {res} (exit status {e.get('returncode')})")
                continue
            if "[====] Synthesis:" in (e.get("stderr") or "") + stdout:
                # a Criterion executable run without --tap: its skips would not count
                failed += 1
                fails.append(f"{tag} {name}: a Criterion test without TAP (meson: protocol : "
                             "'tap', args : criterion_tap + [...]): its cases are not counted")
                continue
            if res in ("OK", "EXPECTEDFAIL"):
                passed += 1
                for why in partial_skips(e):
                    skips.setdefault(why, []).append(f"{tag} {name} (a part of it)")
            elif res == "SKIP":
                skips.setdefault(skip_reason(e), []).append(f"{tag} {name}")
            else:
                failed += 1
                fails.append(f"{tag} {name}: {res} (exit status {e.get('returncode')})")
    skipped = sum(len(v) for v in skips.values())
    print(f"tests: {passed} passed, {failed} failed, {skipped} skipped")
    if skips:
        print(f"skipped ({skipped}):")
        for why, where in sorted(skips.items(), key=lambda kv: -len(kv[1])):
            print(f"  {len(where)} x {why}")
            for w in where:
                print(f"      {w}")
    if reruns:
        print(f"rerun once after a timeout ({len(reruns)}; scripts/test-rerun.py says why):")
        for r in reruns:
            print(f"  {r}")
    if fails:
        print(f"failed ({failed}):")
        for f in fails:
            print(f"  {f}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: scripts/test-totals.py BUILD_DIR...")
    main(sys.argv[1:])
