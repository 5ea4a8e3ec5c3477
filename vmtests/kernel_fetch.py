"""Fetches a Debian kernel package with apt — a private sources list and state under the cache,
so the host's apt configuration is never touched — extracts its vmlinuz and the few modules the
guest needs to mount the host's root (virtio, 9p), and builds the guest's initramfs."""
import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
GUEST_MODULES = ["virtio_pci", "9pnet_virtio", "9p", "overlay"]  # overlay: for tests of container-like mounts
# Where those modules and their dependencies live in a Debian kernel package (5.10 to 6.12).
MODULE_DIRS = ["drivers/virtio", "net/9p", "fs/9p", "fs/netfs", "fs/fscache", "fs/overlayfs"]
BUSYBOX = "/bin/busybox"  # busybox-static: the initramfs has no libc


class FetchError(Exception):
    pass


@dataclasses.dataclass
class KernelImage:
    name: str      # kernels.toml name, e.g. "6.1"
    package: str   # linux-image-6.1.0-50-amd64
    version: str   # 6.1.176-1
    release: str   # 6.1.0-50-amd64 (uname -r)
    vmlinuz: str
    initrd: str
    deb_bytes: int


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        shown = " ".join(a for a in cmd if not a.startswith("-o="))
        raise FetchError(f"{shown} failed: {' '.join((r.stderr or r.stdout).strip().splitlines()[-1:])}")
    return r.stdout


class Apt:
    """apt-get/apt-cache against a private sources list and state directory."""

    def __init__(self, root, sources):
        self.root = root
        os.makedirs(f"{root}/lists/partial", exist_ok=True)
        os.makedirs(f"{root}/archives/partial", exist_ok=True)
        os.makedirs(f"{root}/cache", exist_ok=True)
        with open(f"{root}/sources.list", "w") as f:
            for line in sources:  # deb URL SUITE COMPONENT → signed by Debian's archive keyring
                kind, rest = line.split(" ", 1)
                f.write(f"{kind} [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] {rest}\n")
        self.options = [f"-o=Dir::Etc::SourceList={root}/sources.list", "-o=Dir::Etc::SourceParts=/dev/null",
                        f"-o=Dir::State::Lists={root}/lists", f"-o=Dir::Cache={root}/cache",
                        f"-o=Dir::Cache::Archives={root}/archives", "-o=Dir::State::Status=/dev/null",
                        "-o=APT::Sandbox::User=root", "-o=Debug::NoLocking=1", "-o=Acquire::Retries=3"]

    def update(self):
        run(["apt-get", *self.options, "-qq", "update"])

    def show(self, package):
        """The candidate's control fields."""
        fields, key = {}, None
        for line in run(["apt-cache", *self.options, "show", "--no-all-versions", package]).splitlines():
            if line[:1] in (" ", "\t") and key:
                fields[key] += "\n" + line.strip()
            elif ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        return fields

    def resolve(self, meta):
        """The kernel package a meta-package (linux-image-amd64) depends on, with its fields."""
        depends = self.show(meta).get("Depends", "")
        m = re.match(r"(linux-image-[^\s,(]+)", depends)
        if not m:
            raise FetchError(f"{meta} depends on no linux-image package ({depends!r})")
        return m.group(1), self.show(m.group(1))

    def download(self, package, dest_dir):
        with tempfile.TemporaryDirectory(dir=self.root) as tmp:
            run(["apt-get", *self.options, "-qq", "download", package], cwd=tmp)
            debs = [x for x in os.listdir(tmp) if x.endswith(".deb")]
            if len(debs) != 1:
                raise FetchError(f"apt-get download {package} gave {debs}")
            os.makedirs(dest_dir, exist_ok=True)
            shutil.move(f"{tmp}/{debs[0]}", f"{dest_dir}/{debs[0]}")
            return f"{dest_dir}/{debs[0]}"


def extract(deb, dest, release):
    """vmlinuz, config and the module directories the guest needs; then depmod over them."""
    patterns = [f"./boot/vmlinuz-{release}", f"./boot/config-{release}", f"./lib/modules/{release}/modules.*",
                f"./usr/lib/modules/{release}/modules.*"]
    patterns += [f"./{prefix}lib/modules/{release}/kernel/{d}" for d in MODULE_DIRS for prefix in ("", "usr/")]
    os.makedirs(dest, exist_ok=True)
    fsys = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", deb], stdout=subprocess.PIPE)
    # Not every directory exists in every version (netfs is 6.x only): tar's "not found" is fine.
    subprocess.run(["tar", "-x", "-C", dest, "--wildcards", *patterns], stdin=fsys.stdout,
                   stderr=subprocess.DEVNULL)
    fsys.wait()
    if fsys.returncode != 0 or not os.path.exists(f"{dest}/boot/vmlinuz-{release}"):
        raise FetchError(f"{deb} holds no boot/vmlinuz-{release}")
    if os.path.isdir(f"{dest}/usr/lib/modules") and not os.path.exists(f"{dest}/lib"):
        os.symlink("usr/lib", f"{dest}/lib")  # trixie ships modules under /usr (merged /usr)
    run(["/usr/sbin/depmod", "-b", dest, release])


def module_load_order(tree, release):
    """The .ko files to insmod, dependencies first (modprobe --show-depends)."""
    out = run(["/usr/sbin/modprobe", "-d", tree, "-S", release, "--show-depends", "-a", *GUEST_MODULES])
    order = []
    for line in out.splitlines():
        parts = line.split()
        if parts and parts[0] == "insmod" and parts[1] not in order:
            order.append(parts[1])
    return order


def check_busybox():
    if not os.path.exists(BUSYBOX):
        raise FetchError(f"{BUSYBOX} is missing; install busybox-static (scripts/setup.sh does)")
    ldd = subprocess.run(["ldd", BUSYBOX], capture_output=True, text=True)
    if "not a dynamic executable" not in ldd.stdout + ldd.stderr:
        raise FetchError(f"{BUSYBOX} is dynamically linked; install busybox-static (scripts/setup.sh does)")


def build_initrd(tree, release, out):
    """busybox, the stage-1 init and the modules (decompressed: busybox insmod reads plain .ko)."""
    check_busybox()
    with tempfile.TemporaryDirectory() as root:
        for d in ("bin", "dev", "proc", "sys", "modules"):
            os.makedirs(f"{root}/{d}")
        shutil.copy(BUSYBOX, f"{root}/bin/busybox")
        os.symlink("busybox", f"{root}/bin/sh")
        shutil.copy(f"{HERE}/guest/init", f"{root}/init")
        for i, ko in enumerate(module_load_order(tree, release)):
            base = re.sub(r"\.(xz|zst|gz)$", "", os.path.basename(ko))
            tool = {"xz": ["xz", "-dc"], "zst": ["zstd", "-dc"], "gz": ["gzip", "-dc"]}.get(ko.rpartition(".")[2])
            with open(f"{root}/modules/{i:02d}-{base}", "wb") as f:
                if tool:
                    subprocess.run([*tool, ko], stdout=f, check=True)
                else:
                    shutil.copyfileobj(open(ko, "rb"), f)
        files = subprocess.run(["find", "."], cwd=root, capture_output=True, text=True, check=True).stdout
        with open(out + ".part", "wb") as f:
            subprocess.run(["cpio", "-o", "-H", "newc", "--quiet", "-R", "0:0"], cwd=root, input=files.encode(),
                           stdout=f, check=True)
        os.replace(out + ".part", out)


def prepare(spec, cache, initrd, offline=False, log=print):
    """The kernel image for a kernels.toml entry: resolved, downloaded and extracted unless cached;
    its initramfs is built afresh at `initrd` (under a second), so it always has the current guest/init."""
    name = spec["name"]
    suites = hashlib.sha256("\n".join(spec["sources"]).encode()).hexdigest()[:12]
    apt = Apt(f"{cache}/apt/{suites}", spec["sources"])  # kernels from the same suites share it
    os.makedirs(f"{cache}/kernels", exist_ok=True)
    pointer = f"{cache}/kernels/{name}.json"  # what this name resolved to last time
    try:
        if offline:
            raise FetchError("--offline")
        apt.update()
        package, fields = apt.resolve(spec["package"])
        version, size = fields["Version"], int(fields["Size"])
    except FetchError as e:
        if not os.path.exists(pointer):
            raise FetchError(f"kernel {name}: cannot resolve {spec['package']} ({e}) and nothing is cached")
        with open(pointer) as f:
            cached = json.load(f)
        log(f"kernel {name}: using the cached {cached['package']} {cached['version']} ({e})")
        package, version, size = cached["package"], cached["version"], cached["deb_bytes"]
    release = package.removeprefix("linux-image-")
    tree = f"{cache}/kernels/{release}_{version}"
    if not os.path.exists(f"{tree}/lib/modules/{release}/modules.dep"):
        debs = f"{cache}/debs"
        deb = next((f"{debs}/{x}" for x in sorted(os.listdir(debs)) if x.startswith(f"{package}_{version}_")), None) \
            if os.path.isdir(debs) else None
        if not deb:
            log(f"kernel {name}: downloading {package} {version} ({size / 1e6:.0f} MB)")
            deb = apt.download(package, debs)
        shutil.rmtree(tree, ignore_errors=True)
        extract(deb, tree, release)
    build_initrd(tree, release, initrd)
    image = KernelImage(name, package, version, release, f"{tree}/boot/vmlinuz-{release}", initrd, size)
    with open(pointer, "w") as f:
        json.dump(dataclasses.asdict(image), f)
    return image
