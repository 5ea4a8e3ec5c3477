"""Ground-truth line numbers for the Python test programs: a line ending in "# NAME" is found by
its marker, so the expected stacks never hard-code line numbers."""


def line_of(path, marker):
    with open(path) as f:
        for i, text in enumerate(f, 1):
            if text.rstrip().endswith("# " + marker):
                return i
    raise SystemExit(f"marker {marker} not found in {path}")
