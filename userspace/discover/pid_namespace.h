// Processes in another PID namespace (a container): what they call themselves and their threads.
// The agent inside such a process numbers threads as its namespace does (gettid() there); gtrace,
// BPF and the trace use the host's numbers. /proc/PID/task/*/status (NSpid) maps one to the other.
#pragma once
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

namespace gtrace {

// A process in a PID namespace other than gtrace's.
struct ContainerIdentity {
    uint32_t ns_pid = 0; // its PID in its own namespace
    // The container's name: the id in its cgroup path (docker, containerd, podman; 12 characters),
    // else the hostname of its own UTS namespace, else "pidns:INODE".
    std::string name;
};

// nullopt when pid shares gtrace's PID namespace (or is gone).
std::optional<ContainerIdentity> read_container_identity(int pid);

// The host's tid of thread `ns_tid` of pid as its own namespace numbers it, cached per process and
// re-read when a thread is new. Outside containers the two are the same and nothing is read.
class NamespaceTids {
public:
    uint32_t host_tid(uint32_t pid, uint32_t ns_tid);
    void forget(uint32_t pid) { tables_.erase(pid); }

private:
    struct Table {
        bool own_namespace = false;
        std::unordered_map<uint32_t, uint32_t> to_host;
        std::chrono::steady_clock::time_point scanned;
    };
    static void scan(uint32_t pid, Table& t);
    std::unordered_map<uint32_t, Table> tables_;
};

} // namespace gtrace
