#include "discover/running_jobs.h"

#include <algorithm>
#include <map>
#include <string_view>
#include <tuple>

namespace gtrace {
namespace {

std::string_view base_name(std::string_view path) {
    auto slash = path.rfind('/');
    return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

bool is_python(std::string_view argv0) { return base_name(argv0).starts_with("python"); }

// The module a Python command line runs with -m, or empty. Python's own options come first and
// may be bundled (`-um mod`, `-Xfoo`); -X and -W take a value, -c ends the options.
std::string_view python_module(const std::vector<std::string>& argv) {
    for (size_t i = 1; i < argv.size(); ++i) {
        std::string_view arg = argv[i];
        if (arg.size() < 2 || arg[0] != '-' || arg[1] == '-') return {};
        for (size_t c = 1; c < arg.size(); ++c) {
            char flag = arg[c];
            if (flag == 'c') return {};
            if (flag == 'm' || flag == 'X' || flag == 'W') {
                std::string_view value = arg.substr(c + 1);
                if (value.empty()) value = ++i < argv.size() ? std::string_view(argv[i]) : std::string_view();
                if (flag == 'm') return value;
                break;
            }
        }
    }
    return {};
}

struct Candidate {
    int ppid = 0;
    bool agent = false;
    RankEnv ranks;
    bool cuda = false;
    std::vector<std::string> argv;
    bool has_rank() const { return ranks.rank.has_value(); }
};

// One process's facts, or nullopt when it is a kernel thread, a zombie, gtrace, or gone (or
// replaced by another process under the same PID) while it was read.
std::optional<Candidate> read_candidate(int pid, int self) {
    if (pid == self) return std::nullopt;
    auto before = read_proc_stat(pid);
    if (!before || before->is_kernel_thread() || before->state == 'Z' || before->state == 'X') return std::nullopt;
    Candidate c;
    c.ppid = before->ppid;
    c.argv = read_argv(pid);
    if (c.argv.empty()) return std::nullopt;
    c.agent = is_torchrun_argv(c.argv);
    c.ranks = read_rank_env(pid);
    c.cuda = maps_cuda_library(read_maps(pid));
    auto after = read_proc_stat(pid);
    if (!after || after->start_time_ticks != before->start_time_ticks) return std::nullopt;
    return c;
}

// The nearest ancestor of pid for which `match` holds, or 0. Bounded: a PID reused meanwhile
// could close a loop.
template <typename Match>
int nearest_ancestor(int pid, const std::map<int, Candidate>& all, Match match) {
    for (int steps = 0; steps < 4096; ++steps) {
        auto it = all.find(pid);
        if (it == all.end()) return 0;
        pid = it->second.ppid;
        auto parent = all.find(pid);
        if (parent == all.end()) return 0;
        if (match(parent->second)) return pid;
    }
    return 0;
}

JobProcess make_entry(int pid, const Candidate& c, JobRole role, int job) {
    JobProcess p;
    p.pid = pid;
    p.ppid = c.ppid;
    p.role = role;
    p.job = job;
    if (role == JobRole::Rank) p.ranks = c.ranks;
    p.cuda = c.cuda;
    p.argv = c.argv;
    return p;
}

} // namespace

bool is_torchrun_argv(const std::vector<std::string>& argv) {
    if (argv.empty()) return false;
    if (base_name(argv[0]) == "torchrun") return true;
    if (!is_python(argv[0])) return false;
    if (argv.size() > 1 && base_name(argv[1]) == "torchrun") return true;
    std::string_view module = python_module(argv);
    return module == "torch.distributed.run" || module == "torch.distributed.launch";
}

bool maps_cuda_library(const std::vector<Mapping>& maps) {
    return std::any_of(maps.begin(), maps.end(), [](const Mapping& m) { return m.is_file() && is_cuda_library_name(base_name(m.path)); });
}

std::vector<JobProcess> find_jobs(int self) {
    std::map<int, Candidate> all;
    for (int pid : list_processes())
        if (auto c = read_candidate(pid, self)) all.emplace(pid, std::move(*c));

    std::vector<JobProcess> agents, ranks, loose_ranks, cuda;
    for (const auto& [pid, c] : all) {
        if (c.agent) {
            agents.push_back(make_entry(pid, c, JobRole::Agent, pid));
        } else if (c.has_rank()) {
            // A process under a rank (its DataLoader workers inherit RANK) is that rank's.
            if (nearest_ancestor(pid, all, [](const Candidate& a) { return a.has_rank() && !a.agent; })) continue;
            int agent = nearest_ancestor(pid, all, [](const Candidate& a) { return a.agent; });
            (agent ? ranks : loose_ranks).push_back(make_entry(pid, c, JobRole::Rank, agent));
        } else if (c.cuda) {
            // A forked child of a listed process is traced with it.
            if (!nearest_ancestor(pid, all, [](const Candidate& a) { return a.agent || a.has_rank() || a.cuda; }))
                cuda.push_back(make_entry(pid, c, JobRole::Cuda, 0));
        }
    }
    auto by_rank = [](const JobProcess& a, const JobProcess& b) {
        return std::tuple(a.job, a.ppid, a.ranks.rank.value_or(0), a.pid) < std::tuple(b.job, b.ppid, b.ranks.rank.value_or(0), b.pid);
    };
    std::sort(ranks.begin(), ranks.end(), by_rank);
    std::sort(loose_ranks.begin(), loose_ranks.end(), by_rank);

    std::vector<JobProcess> out;
    for (const auto& agent : agents) {
        out.push_back(agent);
        for (const auto& r : ranks)
            if (r.job == agent.pid) out.push_back(r);
    }
    out.insert(out.end(), loose_ranks.begin(), loose_ranks.end());
    out.insert(out.end(), cuda.begin(), cuda.end());
    return out;
}

} // namespace gtrace
