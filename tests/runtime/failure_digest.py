#!/usr/bin/env python3
"""Why each failed test failed, in a few lines, from ctest's LastTest.log.

CI keeps only part of a long run's output; the test command's last lines are kept. A failed
test's own FAIL lines (run_case.py and the other checks print them) are printed here after the
whole run, with the test's last lines when it printed none (a timeout, a crash).

Usage: failure_digest.py BUILD_DIR
"""
import re
import sys
from pathlib import Path

MAX_LINES = 24


def tests_in(log: str):
    """(name, output lines, what follows the output) for each test in the log."""
    parts = re.split(r"^\d+/\d+ Testing: (\S+)\n", log, flags=re.M)
    for name, block in zip(parts[1::2], parts[2::2]):
        output = block.split("Output:\n", 1)[-1]
        if output.startswith("-" * 10):
            output = output.split("\n", 1)[-1]
        body, _, tail = output.partition("<end of output>")
        yield name, body.splitlines(), tail


def failure_lines(lines):
    """The lines that say a failure, each with the indented lines that continue it (a FAIL's
    "its last lines:", a vmtests problem's console tail).

    >>> failure_lines(["ok: a", "FAIL: no match; its last lines:", "    x", "    ", "    y", "ok: b"])
    ['FAIL: no match; its last lines:', '    x', '    ', '    y']
    """
    out, following = [], False
    for line in lines:
        if re.search(r"\bFAIL\b|Traceback|Error:|error:|timed out|Timeout|problem:", line):
            out.append(line)
            following = True
        elif following and line[:1].isspace():
            out.append(line)  # blank-looking lines too: a quoted tail has empty lines
        else:
            following = False
    return out


def main() -> int:
    log_path = Path(sys.argv[1]) / "Testing" / "Temporary" / "LastTest.log"
    if not log_path.exists():
        print(f"failure digest: no {log_path}")
        return 0
    log = log_path.read_text(errors="replace")
    failed = [(name, lines, tail) for name, lines, tail in tests_in(log) if "Test Passed." not in tail]
    if not failed:
        return 0
    print(f"\n== why each failed test failed ({len(failed)}) ==")
    for name, lines, tail in failed:
        shown = (failure_lines(lines) or lines)[-MAX_LINES:]
        status = "timeout" if "Timeout" in tail or "timeout" in tail.lower() else "failed"
        print(f"-- {name} ({status})")
        for line in shown:
            print(f"   {line[:400]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
