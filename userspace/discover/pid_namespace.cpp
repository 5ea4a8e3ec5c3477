#include "discover/pid_namespace.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cctype>
#include <charconv>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "discover/proc_tree.h"
#include "foundation/input_file.h"

namespace gtrace {
namespace {

constexpr size_t kMaxStatusBytes = 64 << 10;
constexpr auto kRescanEvery = std::chrono::milliseconds(20); // an unknown tid re-reads at most this often

// The NSpid line of /proc/PID[/task/TID]/status: the ids from gtrace's namespace inwards.
std::vector<uint32_t> namespace_ids(const std::string& status_path) {
    std::string status = read_input_file(status_path, kMaxStatusBytes);
    std::vector<uint32_t> ids;
    size_t at = status.find("\nNSpid:");
    if (at == std::string::npos) return ids;
    const char* p = status.data() + at + 7;
    const char* end = status.data() + status.size();
    while (p < end && *p != '\n') {
        while (p < end && (*p == '\t' || *p == ' ')) ++p;
        uint32_t v = 0;
        auto [next, ec] = std::from_chars(p, end, v);
        if (ec != std::errc{}) break;
        ids.push_back(v);
        p = next;
    }
    return ids;
}

uint64_t namespace_inode(const std::string& pid, const char* kind) {
    struct stat st {};
    return stat(fmt::format("/proc/{}/ns/{}", pid, kind).c_str(), &st) == 0 ? st.st_ino : 0;
}

// The last 64-hex-digit component of the process's cgroup paths (".../docker-<id>.scope",
// "/kubepods/.../<id>"), cut to the 12 characters container tools show.
std::string cgroup_container_id(int pid) {
    std::string text = read_input_file(fmt::format("/proc/{}/cgroup", pid), kMaxStatusBytes);
    std::string found;
    size_t run = 0;
    for (size_t i = 0; i <= text.size(); ++i) {
        if (i < text.size() && std::isxdigit(static_cast<unsigned char>(text[i])) && !std::isupper(static_cast<unsigned char>(text[i]))) {
            ++run;
            continue;
        }
        if (run == 64) found = text.substr(i - 64, 12);
        run = 0;
    }
    return found;
}

// The hostname of pid's UTS namespace, read by a short-lived thread that joins it (a thread's
// namespaces are its own); empty when it shares ours. Only letters, digits, '.', '-', '_' are kept.
std::string uts_hostname(int pid) {
    if (namespace_inode(std::to_string(pid), "uts") == namespace_inode("self", "uts")) return {};
    int fd = open(fmt::format("/proc/{}/ns/uts", pid).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return {};
    std::string name;
    std::thread([&] {
        utsname u{};
        if (setns(fd, CLONE_NEWUTS) == 0 && uname(&u) == 0) name = u.nodename;
    }).join();
    close(fd);
    std::string clean;
    for (char c : name)
        if (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_') clean += c;
    return clean.substr(0, 64);
}

} // namespace

std::optional<ContainerIdentity> read_container_identity(int pid) {
    std::vector<uint32_t> ids = namespace_ids(fmt::format("/proc/{}/status", pid));
    if (ids.size() < 2) return std::nullopt;
    ContainerIdentity c;
    c.ns_pid = ids.back();
    c.name = cgroup_container_id(pid);
    if (c.name.empty()) c.name = uts_hostname(pid);
    if (c.name.empty()) c.name = fmt::format("pidns:{}", namespace_inode(std::to_string(pid), "pid"));
    return c;
}

void NamespaceTids::scan(uint32_t pid, Table& t) {
    t.scanned = std::chrono::steady_clock::now();
    t.to_host.clear();
    for (int tid : list_threads(static_cast<int>(pid))) {
        std::vector<uint32_t> ids = namespace_ids(fmt::format("/proc/{}/task/{}/status", pid, tid));
        if (ids.size() >= 2) t.to_host[ids.back()] = static_cast<uint32_t>(tid);
        t.own_namespace = t.own_namespace || ids.size() >= 2;
    }
}

uint32_t NamespaceTids::host_tid(uint32_t pid, uint32_t ns_tid) {
    auto [it, fresh] = tables_.try_emplace(pid);
    Table& t = it->second;
    if (fresh) {
        t.own_namespace = namespace_ids(fmt::format("/proc/{}/status", pid)).size() >= 2;
        if (t.own_namespace) scan(pid, t);
    }
    if (!t.own_namespace) return ns_tid;
    auto found = t.to_host.find(ns_tid);
    if (found == t.to_host.end() && std::chrono::steady_clock::now() - t.scanned >= kRescanEvery) {
        scan(pid, t);
        found = t.to_host.find(ns_tid);
    }
    // A thread gone before we saw it keeps the namespace's number: its calls still show.
    return found == t.to_host.end() ? ns_tid : found->second;
}

} // namespace gtrace
