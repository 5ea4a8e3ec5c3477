#!/usr/bin/env python3
"""Writes gtrace's wheel from the package's staged install (scripts/package.sh calls it): the same
bin/gtrace and lib/gtrace/libgtrace_agent.so as the tarball, under the Python package `gtrace`,
whose `gtrace` console command runs the binary — as py-spy, austin and viztracer ship theirs, so
`pip install gtrace` is all a user needs. No build step, no setuptools: a wheel is a zip with
its metadata (PEP 427, PEP 491).

  make_wheel.py PREFIX VERSION OUT_DIR GLIBC      (GLIBC: the floor the binaries need, e.g. 2.34)

Prints the wheel's path. Tag: py3-none-manylinux_<glibc>_x86_64 (the binaries need nothing beyond
glibc, libgcc_s and libstdc++, all linked in but glibc: tests/runtime/package_check.py checks)."""
import base64
import hashlib
import os
import platform
import stat
import sys
import zipfile

LAUNCHER = '''"""gtrace's console command: runs the gtrace binary this wheel carries (bin/gtrace), which finds
its agent beside it (lib/gtrace/libgtrace_agent.so)."""
import os
import sys


def binary():
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "gtrace")


def main():
    path = binary()
    os.execv(path, [path] + sys.argv[1:])


if __name__ == "__main__":
    main()
'''


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def main():
    prefix, version, out_dir, glibc = sys.argv[1:5]
    machine = platform.machine()
    tag = f"py3-none-manylinux_{glibc.replace('.', '_')}_{machine}"
    dist = f"gtrace-{version}.dist-info"
    files = []  # (name in the wheel, bytes, mode)
    for rel, mode in [("bin/gtrace", 0o755), ("lib/gtrace/libgtrace_agent.so", 0o755)]:
        with open(os.path.join(prefix, rel), "rb") as f:
            files.append((f"gtrace/{rel}", f.read(), mode))
    files.append(("gtrace/__init__.py", LAUNCHER.encode(), 0o644))
    files.append(("gtrace/__main__.py", b"from gtrace import main\n\nmain()\n", 0o644))
    with open(os.path.join(prefix, "share/doc/gtrace/README.md"), "rb") as f:
        readme = f.read()
    metadata = (f"Metadata-Version: 2.1\nName: gtrace\nVersion: {version}\n"
                "Summary: Trace the CUDA calls and GPU work of a running PyTorch job, with no restart and no code change\n"
                "Requires-Python: >=3.8\nDescription-Content-Type: text/markdown\n\n").encode() + readme
    files.append((f"{dist}/METADATA", metadata, 0o644))
    files.append((f"{dist}/WHEEL", f"Wheel-Version: 1.0\nGenerator: gtrace make_wheel.py\nRoot-Is-Purelib: false\nTag: {tag}\n".encode(),
                  0o644))
    files.append((f"{dist}/entry_points.txt", b"[console_scripts]\ngtrace = gtrace:main\n", 0o644))
    record = "\n".join(record_line(name, data) for name, data, _ in files) + f"\n{dist}/RECORD,,\n"
    files.append((f"{dist}/RECORD", record.encode(), 0o644))
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"gtrace-{version}-{tag}.whl")
    with zipfile.ZipFile(path + ".new", "w", zipfile.ZIP_DEFLATED) as z:
        for name, data, mode in files:
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = (stat.S_IFREG | mode) << 16  # pip keeps the executable bit
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    os.replace(path + ".new", path)
    print(path)


if __name__ == "__main__":
    main()
