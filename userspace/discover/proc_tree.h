// Reading processes from /proc: identity, labels, descendants, threads.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace gtrace {

struct ProcStat {
    int pid = 0;
    int ppid = 0;
    char state = '?';
    std::string comm;
    unsigned long flags = 0;       // PF_* flags
    uint64_t start_time_ticks = 0; // identifies the process across PID reuse
    int processor = -1;            // the CPU it last ran on (-1: not given)
    bool is_kernel_thread() const { return flags & 0x00200000UL; } // PF_KTHREAD
};

// Parsed /proc/PID/stat; nullopt when the process does not exist (or vanished).
std::optional<ProcStat> read_proc_stat(int pid, int tid = 0);

// argv; empty for kernel threads and zombies.
std::vector<std::string> read_argv(int pid);
// argv joined by spaces.
std::string read_cmdline(int pid);
std::string join_argv(const std::vector<std::string>& argv);

// /proc/PID/environ as name -> value (empty when unreadable).
std::unordered_map<std::string, std::string> read_environ(int pid);

// The distributed-training variables of a process's environment.
struct RankEnv {
    std::optional<int> rank, local_rank, world_size;
};
RankEnv read_rank_env(int pid);

// The PIDs of every process in /proc (gtrace's PID namespace), in no particular order.
std::vector<int> list_processes();

// The PID and all its descendants (processes, not threads), parents before children; `exclude`
// (gtrace's own PID, when the root is its parent shell, say) and its descendants are left out.
std::vector<int> list_tree(int root, int exclude = 0);

// The real UID of a process (/proc/PID/status); nullopt when it is gone.
std::optional<uint32_t> read_real_uid(int pid);

// A process's credentials as /proc/PID/status gives them (Uid:, Gid: real, effective, saved,
// file-system; Groups:): what it may do to files, and whom it belongs to.
struct ProcCredentials {
    uint32_t uid[4] = {}, gid[4] = {}; // real, effective, saved, file system
    std::vector<uint32_t> groups;
    uint32_t real_uid() const { return uid[0]; }
    uint32_t fs_uid() const { return uid[3]; }
    uint32_t fs_gid() const { return gid[3]; }
    // Every uid of it is `owner`'s (not a setuid program a user's job started, say).
    bool all_uids(uint32_t owner) const { return uid[0] == owner && uid[1] == owner && uid[2] == owner && uid[3] == owner; }
};
std::optional<ProcCredentials> read_credentials(int pid);
// The same from the text of a status file (for tests); nullopt when a line is missing or malformed.
std::optional<ProcCredentials> parse_credentials(std::string_view status);

// Thread ids of a process, and a thread's name.
std::vector<int> list_threads(int pid);
std::string read_thread_name(int pid, int tid);

// A short human label for argv: "python train.py --lr 0.1" with interpreter paths shortened.
std::string short_command(const std::string& cmdline, size_t max_len = 80);

} // namespace gtrace
