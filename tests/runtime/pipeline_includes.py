#!/usr/bin/env python3
"""The include graph of userspace/ against the pipeline's order (docs/how-it-works.md).

A stage may include only stages below it; output/ and analyze/ are side by side (the trace
writers and the analysis, each a consumer of the same events: neither includes the other), and
nothing includes cli/. Prints each include that runs against the order and fails on any.

Usage: pipeline_includes.py SOURCE_DIR
"""
import re
import sys
from pathlib import Path

# Lowest first; stages on one level must not include each other.
LEVELS = [["foundation"], ["format"], ["discover"], ["attach"], ["collect"], ["decode"], ["model"],
          ["output", "analyze"], ["capture"], ["cli"]]
LEVEL = {stage: i for i, stages in enumerate(LEVELS) for stage in stages}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/[^"]+"', re.M)


def main() -> int:
    root = Path(sys.argv[1]) / "userspace"
    stages = sorted(p.name for p in root.iterdir() if p.is_dir())
    unknown = [s for s in stages if s not in LEVEL]
    if unknown:
        print(f"FAIL: folders of userspace/ not in the pipeline's order: {unknown} (add them to LEVELS and docs/how-it-works.md)")
        return 1
    wrong, checked = [], 0
    for path in sorted(root.rglob("*")):
        if path.suffix not in (".h", ".c", ".cpp"):
            continue
        stage = path.relative_to(root).parts[0]
        for target in INCLUDE.findall(path.read_text(errors="replace")):
            if target not in LEVEL or target == stage:
                continue  # gtrace/ (include/, shared with BPF), generated headers, its own stage
            checked += 1
            if LEVEL[target] >= LEVEL[stage]:
                wrong.append(f"{path.relative_to(root.parent)} includes {target}/ "
                             f"({'the same level' if LEVEL[target] == LEVEL[stage] else 'above it'})")
    for w in wrong:
        print(f"FAIL: {w}")
    if wrong:
        return 1
    print(f"ok: {checked} includes across stages, each into a stage below")
    return 0


if __name__ == "__main__":
    sys.exit(main())
