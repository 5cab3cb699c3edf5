"""scripts/test-rerun.sh: one rerun of tests that timed out, nothing else.

Each case writes a small meson project whose tests pass, fail, hang once
(a marker file makes the second run pass) or always hang, runs the script on
it as scripts/test.sh does, and checks its exit status, whether it reran,
and what scripts/test-totals.py then counts. Uses /usr/bin/python3 and the
meson on PATH."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.environ.get("L3_SOURCE_ROOT") or os.path.join(os.path.dirname(__file__), "..", "..")
RERUN = os.path.join(ROOT, "scripts", "test-rerun.sh")
TOTALS = os.path.join(ROOT, "scripts", "test-totals.py")

BODY = {
    "pass": "exit 0",
    "fail": "exit 1",
    "tap": 'printf "TAP version 13\\n1..2\\nok 1 - a\\nok 2 - b # SKIP no b here\\n"',
    "hang_once": 'm="$MARKS/$0.$1"; if [ -e "$m" ]; then exit 0; fi; : > "$m"; exec sleep 60',
    "hang": "exec sleep 60",
}


class Rerun(unittest.TestCase):
    def project(self, tests):
        """A meson project with tests (name, kind), built in a temp dir."""
        d = tempfile.mkdtemp(prefix="l3-rerun-")
        self.addCleanup(subprocess.run, ["rm", "-rf", d])
        marks = os.path.join(d, "marks")
        os.mkdir(marks)
        lines = ["project('rerun-check')", "sh = find_program('sh')"]
        for name, kind in tests:
            proto = ", protocol : 'tap'" if kind == "tap" else ""
            lines.append(f"test('{name}', sh, args : ['-c', '''{BODY[kind]}''', 't', '{name}'],"
                         f" timeout : 2, env : {{'MARKS' : '{marks}'}}{proto})")
        src = os.path.join(d, "src")
        os.mkdir(src)
        with open(os.path.join(src, "meson.build"), "w") as f:
            f.write("\n".join(lines) + "\n")
        b = os.path.join(d, "build")
        subprocess.run(["meson", "setup", b, src], check=True, stdout=subprocess.DEVNULL)
        return b, marks

    def run_rerun(self, b):
        p = subprocess.run([RERUN, b, "--num-processes", "2", "--timeout-multiplier", "1"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        totals = subprocess.run(["/usr/bin/python3", TOTALS, b], stdout=subprocess.PIPE,
                                text=True, check=True).stdout
        return p.returncode, p.stdout, totals

    def log(self, b):
        with open(os.path.join(b, "meson-logs", "testlog.json")) as f:
            return {json.loads(l)["name"].split(" / ")[-1]: json.loads(l) for l in f if l.strip()}

    def test_a_test_that_hangs_once_is_rerun_and_listed(self):
        b, _ = self.project([("ok", "pass"), ("cases", "tap"), ("flaky", "hang_once")])
        rc, out, totals = self.run_rerun(b)
        self.assertEqual(rc, 0, out)
        self.assertIn("== rerun once after a timeout (scripts/test-rerun.py says why): flaky", out)
        log = self.log(b)
        self.assertEqual(sorted(log), ["cases", "flaky", "ok"])  # the first run's other entries kept
        self.assertEqual(log["flaky"]["result"], "OK")
        self.assertEqual(log["flaky"]["rerun_after"], "TIMEOUT")
        self.assertNotIn("rerun_after", log["ok"])
        self.assertIn("tests: 3 passed, 0 failed, 1 skipped", totals)
        self.assertIn("rerun once after a timeout (1;", totals)
        self.assertIn("build flaky: first run TIMEOUT after", totals)

    def test_a_test_that_hangs_again_fails(self):
        b, _ = self.project([("ok", "pass"), ("stuck", "hang")])
        rc, out, totals = self.run_rerun(b)
        self.assertEqual(rc, 1, out)
        self.assertIn("== rerun once after a timeout", out)
        self.assertEqual(self.log(b)["stuck"]["result"], "TIMEOUT")
        self.assertIn("tests: 1 passed, 1 failed, 0 skipped", totals)
        self.assertIn("build stuck: first run TIMEOUT after", totals)

    def test_nothing_is_rerun_when_another_test_failed(self):
        b, marks = self.project([("bad", "fail"), ("flaky", "hang_once")])
        rc, out, totals = self.run_rerun(b)
        self.assertEqual(rc, 1, out)
        self.assertNotIn("== rerun", out)
        self.assertEqual(os.listdir(marks), ["t.flaky"])  # ran once only
        self.assertIn("tests: 0 passed, 2 failed, 0 skipped", totals)
        self.assertNotIn("rerun once", totals)

    def test_nothing_is_rerun_when_three_tests_timed_out(self):
        b, marks = self.project([(f"flaky{i}", "hang_once") for i in range(3)])
        rc, out, totals = self.run_rerun(b)
        self.assertEqual(rc, 1, out)
        self.assertNotIn("== rerun", out)
        self.assertIn("tests: 0 passed, 3 failed, 0 skipped", totals)

    def test_a_passing_run_is_not_rerun(self):
        b, _ = self.project([("ok", "pass"), ("cases", "tap")])
        rc, out, totals = self.run_rerun(b)
        self.assertEqual(rc, 0, out)
        self.assertNotIn("== rerun", out)
        self.assertFalse(os.path.exists(os.path.join(b, "meson-logs", "testlog-first.json")))
        self.assertIn("tests: 2 passed, 0 failed, 1 skipped", totals)


if __name__ == "__main__":
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "common"))
    import tap
    tap.main()
