"""tap.py — runs a module's unittest cases and reports each one in TAP on
stdout (meson's 'tap' protocol), so that a skipped case is counted with its
reason (scripts/test-totals.py). Tracebacks of failures go to stderr.

    if __name__ == "__main__":
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "common"))
        import tap
        tap.main()
"""
import sys
import traceback
import unittest


class TapResult(unittest.TestResult):
    def __init__(self):
        super().__init__()
        self.n = 0

    def _line(self, status, test, note=""):
        self.n += 1
        name = test.id() if hasattr(test, "id") else str(test)
        print(f"{status} {self.n} - {name}{note}", flush=True)

    def addSuccess(self, test):
        super().addSuccess(test)
        self._line("ok", test)

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._line("ok", test, f" # SKIP {reason}")

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._line("not ok", test, " # TODO expected failure")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._line("not ok", test, " (unexpected success)")

    def _bad(self, kind, test, err):
        self._line("not ok", test, f" ({kind})")
        sys.stderr.write(f"{kind}: {test}\n" + "".join(traceback.format_exception(*err)))
        sys.stderr.flush()

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._bad("failure", test, err)

    def addError(self, test, err):
        super().addError(test, err)
        self._bad("error", test, err)

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            self._bad("failure" if issubclass(err[0], test.failureException) else "error",
                      subtest, err)


def main(module="__main__"):
    """Runs every case of the module; exit status 0 when all passed or skipped."""
    suite = unittest.defaultTestLoader.loadTestsFromModule(sys.modules[module])
    print("TAP version 13", flush=True)
    result = TapResult()
    suite.run(result)
    print(f"1..{result.n}", flush=True)  # the plan at the end: class-level skips and errors count too
    sys.exit(0 if result.wasSuccessful() else 1)
