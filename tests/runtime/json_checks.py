"""[expect] checks on JSON files a run wrote (a `gtrace report --json`, say), by dotted key:
`json_match` ({file = {"a.0.b" = "regex"}}: the value's text matches) and `json_near_truth`
(a list of {file, key, truth, truth_key, within, slack_key}: the value is within the fraction
`within` of the number `truth_key`, dotted too, in the JSON that a program printed after the word
`truth`, plus the number `slack_key` of that JSON where given — what the program measured of its own
error, e.g. the time it sat preempted between its timestamp and the call). A number in a dotted key
indexes a list."""
import json
import re


def fail(msg):
    print(f"FAIL: {msg}", flush=True)
    raise SystemExit(1)


def dotted(doc, key):
    for part in key.split("."):
        if isinstance(doc, list) and part.isdigit() and int(part) < len(doc):
            doc = doc[int(part)]
        elif isinstance(doc, dict):
            doc = doc.get(part)
        else:
            return None
    return doc


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{path}: not readable JSON: {e}")


def truth_from(program_lines, word):
    for line in program_lines:
        m = re.search(re.escape(word) + r" (\{.*\})", line)
        if m:
            return json.loads(m.group(1))
    fail(f"no program printed {word} {{json}}")


def check_json_files(expect, program_lines):
    for path, keys in expect.get("json_match", {}).items():
        doc = load(path)
        for key, pattern in keys.items():
            got = dotted(doc, key)
            if got is None or not re.search(pattern, str(got)):
                fail(f"{path}: {key} is {got!r}, expected to match /{pattern}/")
            print(f"ok: {key} = {got!r} matches /{pattern}/")
    for c in expect.get("json_near_truth", []):
        got = dotted(load(c["file"]), c["key"])
        truth = truth_from(program_lines, c["truth"])
        want = dotted(truth, c["truth_key"])
        if not isinstance(got, (int, float)) or not isinstance(want, (int, float)):
            fail(f"{c['key']} is {got!r} and {c['truth']}.{c['truth_key']} is {want!r}: not two numbers")
        slack = 0.0
        if "slack_key" in c:
            slack = dotted(truth, c["slack_key"])
            if not isinstance(slack, (int, float)) or slack < 0:
                fail(f"{c['truth']}.{c['slack_key']} is {slack!r}: not a number of at least 0")
        bound = f"{c['within']:.0%} of {c['truth_key']} {want:.3f}" + (f" + {c['slack_key']} {slack:.3f}" if "slack_key" in c else "")
        if abs(got - want) > c["within"] * abs(want) + slack:
            fail(f"{c['key']} is {got:.3f}, not within {bound}")
        print(f"ok: {c['key']} = {got:.3f}, within {bound} ({(got - want) / want:+.1%})")
