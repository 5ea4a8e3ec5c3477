#include "attach/kernel_features.h"
#include "foundation/test_hooks.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

#include "attach/uprobe_multi.h"

namespace gtrace {
namespace {

KernelFeature feature(std::string name, Support s, std::string detail = {}) {
    return {std::move(name), s, std::move(detail)};
}

// A libbpf probe's answer: 1 supported, 0 not, negative: the probe itself failed.
KernelFeature from_libbpf(const char* name, int answer) {
    if (answer == 1) return feature(name, Support::Yes);
    if (answer == 0) return feature(name, Support::No);
    return feature(name, Support::Unknown, std::string("probe failed: ") + strerror(-answer));
}

KernelFeature probe_btf() {
    const char* env = GTRACE_TEST_HOOK("KERNEL_BTF");
    std::string path = env ? env : "/sys/kernel/btf/vmlinux";
    std::string name = "BTF (" + path + ")";
    if (access(path.c_str(), F_OK) != 0) return feature(name, Support::No, "missing: the kernel needs CONFIG_DEBUG_INFO_BTF=y");
    btf* b = btf__parse(path.c_str(), nullptr);
    if (!b) return feature(name, Support::No, std::string("unreadable: ") + strerror(errno));
    std::string types = std::to_string(btf__type_cnt(b)) + " types";
    btf__free(b);
    return feature(name, Support::Yes, types);
}

KernelFeature probe_uprobes() {
    const char* name = "uprobes";
    std::ifstream type("/sys/bus/event_source/devices/uprobe/type");
    int id = 0;
    if (type >> id) return feature(name, Support::Yes);
    return feature(name, Support::No, "no uprobe PMU: the kernel needs CONFIG_UPROBE_EVENTS=y");
}

// The kernel creates a multi-uprobe link only for a regular file: "/" gets EBADF where the link
// type exists, EINVAL (unknown attach type) where it does not.
KernelFeature probe_multi_link(const char* name, uint32_t attach_type, const char* fallback) {
    const bpf_insn insns[] = {
        {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .src_reg = 0, .off = 0, .imm = 0},
        {.code = BPF_JMP | BPF_EXIT, .dst_reg = 0, .src_reg = 0, .off = 0, .imm = 0},
    };
    LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = static_cast<bpf_attach_type>(attach_type));
    int prog = bpf_prog_load(BPF_PROG_TYPE_KPROBE, nullptr, "GPL", insns, 2, &opts);
    if (prog < 0) {
        if (errno == EINVAL) return feature(name, Support::No, fallback);
        return feature(name, Support::Unknown, std::string("probe failed: ") + strerror(errno));
    }
    uint64_t offset = 0;
    int link = create_uprobe_multi_link(prog, "/", &offset, nullptr, 1, false, attach_type);
    int err = errno;
    if (link >= 0) close(link);
    close(prog);
    if (link < 0 && err == EBADF) return feature(name, Support::Yes);
    return feature(name, Support::No, fallback);
}

} // namespace

KernelFeature probe_uprobe_multi() {
    return probe_multi_link("multi-uprobe links (uprobe_multi)", kTraceUprobeMulti, "kernel 6.6+; per-probe links are used instead");
}

KernelFeature probe_uprobe_session() {
    return probe_multi_link("uprobe sessions", kTraceUprobeSession,
                            "kernel 6.13+; entry and return probes are used instead");
}

namespace {

KernelFeature probe_bpf_stats() {
    const char* name = "bpf_stats (run time per program)";
    std::ifstream sysctl("/proc/sys/kernel/bpf_stats_enabled");
    int enabled = 0;
    if (!(sysctl >> enabled)) return feature(name, Support::No, "no kernel.bpf_stats_enabled sysctl");
    return feature(name, Support::Yes, enabled ? "collecting now" : "off now: sysctl kernel.bpf_stats_enabled=1 turns it on");
}

// Whether this process may create BPF objects at all: without that every BPF probe would read
// as "not supported".
bool may_use_bpf(std::string* why) {
    int fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, nullptr, 4, 4, 1, nullptr);
    if (fd >= 0) {
        close(fd);
        return true;
    }
    *why = errno == EPERM || errno == EACCES ? "not probed: needs root or CAP_BPF"
                                             : std::string("not probed: the bpf() system call failed: ") + strerror(errno);
    return false;
}

// The features gtrace cannot do without, each with the first upstream kernel that has it.
struct Required {
    KernelFeature KernelFeatures::*feature;
    const char* since;
};
constexpr Required kRequired[] = {
    {&KernelFeatures::ring_buffer, "5.8"},
    {&KernelFeatures::task_storage, "5.11"},
    {&KernelFeatures::attach_cookie, "5.15"},
    {&KernelFeatures::bpf_loop, "5.17"},
};

constexpr const char* kRing = "BPF ring buffer";
constexpr const char* kCookie = "BPF attach cookies (uprobe)";
constexpr const char* kStorage = "task local storage";
constexpr const char* kLoop = "bpf_loop";

// Fills the features of kRequired; the caller has checked that this process may use BPF. Task
// storage is the map, its helper and the BTF task pointer the programs key it with.

void probe_required(KernelFeatures& k) {
    auto helper = [](bpf_func_id id) { return libbpf_probe_bpf_helper(BPF_PROG_TYPE_KPROBE, id, nullptr); };
    libbpf_print_fn_t previous = libbpf_set_print(nullptr); // a refusal is an answer, not a warning
    k.ring_buffer = from_libbpf(kRing, libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, nullptr));
    k.attach_cookie = from_libbpf(kCookie, helper(BPF_FUNC_get_attach_cookie));
    k.task_storage = from_libbpf(kStorage, libbpf_probe_bpf_map_type(BPF_MAP_TYPE_TASK_STORAGE, nullptr));
    for (bpf_func_id id : {BPF_FUNC_task_storage_get, BPF_FUNC_get_current_task_btf})
        if (k.task_storage.support == Support::Yes) k.task_storage = from_libbpf(kStorage, helper(id));
    k.bpf_loop = from_libbpf(kLoop, helper(BPF_FUNC_loop));
    libbpf_set_print(previous);
}

} // namespace

KernelFeatures probe_kernel_features() {
    KernelFeatures k;
    utsname u{};
    if (uname(&u) == 0) k.release = u.release;
    k.btf = probe_btf();
    k.uprobes = probe_uprobes();
    k.bpf_stats = probe_bpf_stats();
    std::string why;
    if (!may_use_bpf(&why)) {
        k.ring_buffer = feature(kRing, Support::Unknown, why);
        k.attach_cookie = feature(kCookie, Support::Unknown, why);
        k.task_storage = feature(kStorage, Support::Unknown, why);
        k.bpf_loop = feature(kLoop, Support::Unknown, why);
        k.uprobe_multi = feature("multi-uprobe links (uprobe_multi)", Support::Unknown, why);
        k.uprobe_session = feature("uprobe sessions", Support::Unknown, why);
        return k;
    }
    probe_required(k);
    k.uprobe_multi = probe_uprobe_multi();
    k.uprobe_session = probe_uprobe_session();
    return k;
}

Result<void> check_kernel_features() {
    std::string why;
    if (!may_use_bpf(&why)) return {}; // nothing to probe with: loading the programs says why
    KernelFeatures k;
    probe_required(k);
    std::string missing;
    for (const Required& r : kRequired) {
        const KernelFeature& f = k.*r.feature;
        if (f.support == Support::No) missing += (missing.empty() ? "" : ", ") + f.name + " (Linux " + r.since + ")";
    }
    if (missing.empty()) return {};
    utsname u{};
    uname(&u);
    return make_error(ExitCode::KernelUnsupported,
                      "this kernel (Linux " + std::string(u.release) + ") lacks BPF features gtrace needs: " + missing +
                          "; run gtrace on a kernel that has them (Linux " + kRequired[std::size(kRequired) - 1].since +
                          " or newer)");
}

} // namespace gtrace
