"""The raw uprobe floor: tracefs `p:`/`r:` uprobes (no BPF) on the CUDA entry points gtrace probes,
with the trace events enabled and tracing off, so that each call pays the traps and nothing else.
gtrace's cost per call is judged against it (bench/README.md).

As a module: `with Floor(pid, symbols): ...` probes every ELF object PID maps that defines any of
SYMBOLS (as gtrace does: libcudart, libcuda, and libraries that link cudart statically).
`gtrace_symbols()` reads gtrace's probe table (include/gtrace/cuda_api.h, or the copy installed
beside this script). As a command, for a look by hand:

  uprobe_floor.py --pid PID [--symbols launch|all] [--seconds S]
"""
import argparse
import os
import re
import struct
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TRACEFS = "/sys/kernel/tracing"
GROUP = "gtfloor"
LAUNCH = ("cudaLaunchKernel", "cuLaunchKernel", "cuLaunchKernelEx")


def gtrace_symbols():
    for path in (os.path.join(HERE, "..", "include", "gtrace", "cuda_api.h"), os.path.join(HERE, "cuda_api.h")):
        if os.path.exists(path):
            with open(path) as f:
                return re.findall(r'X\(\w+, "(\w+)"', f.read())
    raise SystemExit("uprobe_floor: gtrace's probe table (cuda_api.h) is neither in the checkout nor beside this script")


def function_offsets(path, wanted):
    """{symbol: file offset} for the defined functions named in WANTED (.dynsym and .symtab)."""
    out = {}
    with open(path, "rb") as f:
        ident = f.read(64)
        if ident[:4] != b"\x7fELF" or ident[4] != 2 or ident[5] != 1:
            return out  # 64-bit little-endian only, like the hosts gtrace runs on
        phoff, shoff = struct.unpack_from("<QQ", ident, 0x20)
        phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", ident, 0x36)
        f.seek(phoff)
        loads = []
        for _ in range(phnum):
            p_type, _, p_offset, p_vaddr, _, p_filesz, _, _ = struct.unpack("<IIQQQQQQ", f.read(phentsize)[:56])
            if p_type == 1:
                loads.append((p_vaddr, p_filesz, p_offset))
        f.seek(shoff)
        sections = [struct.unpack("<IIQQQQIIQQ", f.read(shentsize)[:64]) for _ in range(shnum)]
        for sh in sections:
            if sh[1] not in (2, 11):  # SHT_SYMTAB, SHT_DYNSYM
                continue
            strtab = sections[sh[6]]
            f.seek(strtab[4])
            names = f.read(strtab[5])
            f.seek(sh[4])
            data = f.read(sh[5])
            for i in range(0, len(data) - 23, 24):
                st_name, st_info, _, st_shndx, st_value, _ = struct.unpack_from("<IBBHQQ", data, i)
                if st_info & 0xF != 2 or st_shndx == 0 or not st_value:
                    continue
                name = names[st_name:names.index(b"\0", st_name)].decode(errors="replace")
                if name in wanted and name not in out:
                    for vaddr, size, offset in loads:
                        if vaddr <= st_value < vaddr + size:
                            out[name] = st_value - vaddr + offset
    return out


def mapped_objects(pid):
    paths = []
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) == 6 and parts[5].startswith("/") and "x" in parts[1]:
                path = parts[5].strip()
                if path not in paths and os.path.isfile(path):
                    paths.append(path)
    return paths


class Floor:
    """Entry and return uprobes on SYMBOLS in every object PID maps, trace events on, tracing off."""

    def __init__(self, pid, symbols):
        self.pid, self.symbols, self.events, self.probes = pid, set(symbols), [], []

    def _write(self, name, text, append=False):
        # os.open: Python's append mode seeks to the end, which tracefs files refuse.
        fd = os.open(os.path.join(TRACEFS, name), os.O_WRONLY | (os.O_APPEND if append else os.O_TRUNC))
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)

    def __enter__(self):
        if not os.path.exists(os.path.join(TRACEFS, "uprobe_events")):
            os.system(f"mount -t tracefs nodev {TRACEFS} 2>/dev/null")
        with open(os.path.join(TRACEFS, "tracing_on")) as f:
            self.tracing_on = f.read().strip()
        self._write("tracing_on", "0")
        try:
            for path in mapped_objects(self.pid):
                for name, offset in sorted(function_offsets(path, self.symbols).items()):
                    self.probes.append((path, name))
                    for kind in "pr":
                        event = f"{kind}{len(self.events)}"
                        self._write("uprobe_events", f"{kind}:{GROUP}/{event} {path}:{offset:#x}\n", append=True)
                        self.events.append(event)
            if self.events:
                self._write(f"events/{GROUP}/enable", "1")
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        if self.events:
            self._write(f"events/{GROUP}/enable", "0")
        for event in self.events:
            self._write("uprobe_events", f"-:{GROUP}/{event}\n", append=True)
        self._write("tracing_on", self.tracing_on)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--symbols", choices=["launch", "all"], default="all")
    ap.add_argument("--seconds", type=float, default=10)
    args = ap.parse_args()
    symbols = LAUNCH if args.symbols == "launch" else gtrace_symbols()
    with Floor(args.pid, symbols) as floor:
        print(f"uprobe_floor: {len(floor.events)} tracefs uprobes on {len(floor.probes)} functions; holding {args.seconds} s")
        time.sleep(args.seconds)


if __name__ == "__main__":
    main()
