#!/usr/bin/python3
"""The README and docs/ against the binary they describe:

  options   every option of every command's `--help` is documented — a row of an option table
            (`| option | meaning |`) in the README or docs/, or the command's synopsis line in
            docs/usage.md's first block — and every documented option is in `--help`: a table's
            in some command's, a synopsis line's in that command's. A short form written beside
            a long one (`--pid, -p`) must be that option's short form.
  links     every relative link of the README and docs/*.md leads to a file that exists, and its
            #anchor to a heading of that file (GitHub's slugs).
  length    the README stays something a newcomer reads in five minutes: at most 150 lines;
            the reference lives in docs/.
  event args every argument name of each kind of event (CUDA call, GPU op, collective, NVTX
            range), as userspace/output/event_args.h's tables have them (the one vocabulary the
            three writers encode), is in docs/trace-formats.md (`name` or args.name), and the
            docs' list of a call's, a GPU op's and an NVTX range's arguments names no other.

Usage: docs_check.py --build BUILD --source SOURCE"""
import argparse
import glob
import os
import re
import subprocess
import sys

COMMANDS = ["ps", "attach", "record", "dump", "report", "recover", "merge"]
README_MAX_LINES = 150
HELP_OPTION = re.compile(r"^  (?:-([a-zA-Z]) \[ )?--([a-z0-9][a-z0-9-]*)")
FAILURES = []


def fail(msg):
    FAILURES.append(msg)
    print(f"FAIL: {msg}", flush=True)


def help_options(gtrace, command):
    """{long: short or None} of `gtrace COMMAND --help`, -h/--help left out."""
    r = subprocess.run([gtrace, command, "--help"], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        fail(f"gtrace {command} --help exited {r.returncode}: {r.stderr.strip()[:300]}")
    out = {}
    for line in r.stdout.splitlines():
        m = HELP_OPTION.match(line)
        if m and m.group(2) != "help":
            out[m.group(2)] = m.group(1)
    if not out and command != "ps":
        fail(f"gtrace {command} --help lists no option (its format changed?)")
    return out


def markdown_files(source):
    return [os.path.join(source, "README.md")] + sorted(glob.glob(os.path.join(source, "docs", "*.md")))


def outside_fences(text):
    """The lines of a markdown text outside its ``` blocks."""
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            yield line


def table_options(text):
    """[(long, short or None)] of the first cells of every `| option | meaning |` table."""
    out, in_table = [], False
    for line in outside_fences(text):
        if re.match(r"^\|\s*option\s*\|", line):
            in_table = True
            continue
        if not line.startswith("|"):
            in_table = False
            continue
        if in_table and not re.match(r"^\|[-\s|]+$", line):
            cell = line.split("|")[1]
            longs = re.findall(r"--([a-z0-9][a-z0-9-]*)", cell)
            shorts = re.findall(r"(?<![-\w])-([a-zA-Z])\b", cell)
            if not longs:
                fail(f"an option table row names no option: {line[:100]}")
            for i, name in enumerate(longs):
                out.append((name, shorts[i] if i < len(shorts) and len(longs) == 1 else None))
    return out


def synopsis_options(usage_text):
    """{command: {long or short option}} of docs/usage.md's first code block."""
    block = re.search(r"^```\n(.*?)^```", usage_text, re.M | re.S)
    if not block:
        fail("docs/usage.md has no synopsis block")
        return {}
    out, command = {}, None
    for line in block.group(1).splitlines():
        words = line.split()
        if words and words[0] == "gtrace":
            command = words[1] if len(words) > 1 and words[1] in COMMANDS else None
        if command:
            opts = out.setdefault(command, set())
            opts.update(re.findall(r"--([a-z0-9][a-z0-9-]*)", line))
            opts.update("-" + s for s in re.findall(r"(?<![-\w])-([a-zA-Z])\b", line))
    return out


def check_options(gtrace, source):
    helps = {c: help_options(gtrace, c) for c in COMMANDS}
    texts = {path: open(path).read() for path in markdown_files(source)}
    tables = [row for text in texts.values() for row in table_options(text)]
    synopsis = synopsis_options(texts[os.path.join(source, "docs", "usage.md")])
    documented = {name for name, _ in tables}
    for command, options in helps.items():
        if command not in synopsis:
            fail(f"docs/usage.md's synopsis has no line for gtrace {command}")
        for name, short in options.items():
            if name not in documented and name not in synopsis.get(command, set()):
                fail(f"gtrace {command} --{name} is in --help but documented nowhere (an option table or the synopsis)")
    every_help = {name: short for options in helps.values() for name, short in options.items()}
    for name, short in tables:
        if name not in every_help:
            fail(f"--{name} is documented in an option table but no command's --help has it")
        elif short and every_help[name] != short:
            fail(f"--{name} is documented as -{short}, but --help gives {'-' + every_help[name] if every_help[name] else 'no short form'}")
    for command, options in synopsis.items():
        shorts = {"-" + s for s in helps[command].values() if s}
        for name in options:
            if name not in helps[command] and name not in shorts:
                fail(f"docs/usage.md's synopsis gives gtrace {command} {'-' if not name.startswith('-') else ''}-{name.lstrip('-')}, "
                     f"which gtrace {command} --help does not have")
    print(f"ok: {sum(len(o) for o in helps.values())} options of {len(helps)} commands against "
          f"{len(tables)} table rows and the synopsis", flush=True)


def slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation but '-' and '_' dropped, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def check_links(source):
    anchors = {}
    for path in markdown_files(source):
        anchors[os.path.realpath(path)] = {slug(m.group(1)) for line in outside_fences(open(path).read())
                                           if (m := re.match(r"^#+ (.*)", line))}
    count = 0
    for path in markdown_files(source):
        for line in outside_fences(open(path).read()):
            for target in re.findall(r"\]\(([^)\s]+)\)", line):
                if re.match(r"^[a-z]+:", target):
                    continue
                count += 1
                file_part, _, anchor = target.partition("#")
                dest = os.path.realpath(os.path.join(os.path.dirname(path), file_part)) if file_part else os.path.realpath(path)
                where = os.path.relpath(path, source)
                if not os.path.exists(dest):
                    fail(f"{where}: the link ({target}) leads to no file")
                elif anchor and dest.endswith(".md") and anchor not in anchors.get(dest, set()):
                    fail(f"{where}: the link ({target}) names no heading of {os.path.relpath(dest, source)}")
    print(f"ok: {count} relative links checked", flush=True)


# Each event's argument table in userspace/output/event_args.h (the one vocabulary the three
# writers encode); the part of docs/trace-formats.md that lists that event's arguments; how an
# argument is named there (a `name` of a list, args.name in a text that names values too); and
# whether the list's parenthesized asides (values: `HtoD`, `agent`) are left out first.
EVENT_TABLES = {"kCallArgNames": ("call", r"with `args`: (.*?)\n  The three writers encode", r"`([a-z_]+)`", True),
                "kGpuOpArgNames": ("GPU op", r"\*\*GPU tracks\*\*.*?a slice per\s+kernel(.*?)on the same CLOCK_MONOTONIC",
                                   r"`([a-z_]+)`(?!:)", False),
                "kCollectiveArgNames": ("collective", None, None, False),
                "kNvtxArgNames": ("NVTX range", r"\*\*NVTX ranges\*\*(.*?)they count as ranges", r"args\.([a-z_]+)", False)}


def check_event_args(source):
    header = open(os.path.join(source, "userspace/output/event_args.h")).read()
    doc = open(os.path.join(source, "docs/trace-formats.md")).read()
    total = 0
    for table_name, (event, listing, arg_name, drop_asides) in EVENT_TABLES.items():
        table = re.search(rf"{table_name} = \{{(.*?)\}};", header, re.S)
        names = re.findall(r'"([A-Za-z_]+)"', table.group(1)) if table else []
        if not names:
            fail(f"no {table_name} table in userspace/output/event_args.h")
            continue
        total += len(names)
        for name in names:  # a Time argument is written NAME_us (JSON) and NAME_ns (.pftrace)
            if not re.search(rf"`{name}(_us|_ns)?`|args\.{name}(_us|_ns)?\b", doc):
                fail(f"docs/trace-formats.md does not describe the {event} argument {name!r} (output/event_args.h {table_name})")
        # The list of the event's arguments, as the docs give it, names none the writers lack.
        found = re.search(listing, doc, re.S) if listing else None
        if listing and not found:
            fail(f"docs/trace-formats.md: the list of a {event}'s arguments was not found (docs_check.py EVENT_TABLES)")
        text = found.group(1) if found else ""
        while drop_asides and re.search(r"\([^()]*\)", text):
            text = re.sub(r"\([^()]*\)", "", text)
        for name in re.findall(arg_name, text) if listing else []:
            if name not in names:
                fail(f"docs/trace-formats.md lists {name!r} among a {event}'s arguments; output/event_args.h has no such argument")
    print(f"ok: {total} event arguments documented ({len(EVENT_TABLES)} tables)", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    a = ap.parse_args()
    source = os.path.abspath(a.source)
    check_options(os.path.join(os.path.abspath(a.build), "gtrace"), source)
    check_links(source)
    check_event_args(source)
    lines = open(os.path.join(source, "README.md")).read().count("\n")
    if lines > README_MAX_LINES:
        fail(f"the README has {lines} lines (at most {README_MAX_LINES}): move reference to docs/")
    else:
        print(f"ok: the README has {lines} lines", flush=True)
    if FAILURES:
        sys.exit(1)
    print("docs_check: ok", flush=True)


if __name__ == "__main__":
    main()
