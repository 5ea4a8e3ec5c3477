#include "cli/ps_command.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "discover/running_jobs.h"
#include "foundation/printable.h"
#include "foundation/redact.h"

namespace gtrace {
namespace {

constexpr size_t kPipedCommandChars = 160; // command column when stdout is not a terminal
constexpr size_t kMinCommandChars = 30;

const char* role_name(JobRole role) {
    return role == JobRole::Agent ? "agent" : role == JobRole::Rank ? "rank" : "cuda";
}

std::vector<std::string> shown_argv(const JobProcess& p, bool redact) {
    std::vector<std::string> argv = redact ? redact_argv(p.argv) : p.argv;
    for (auto& arg : argv) arg = printable(arg);
    return argv;
}

// The command column: argv[0] without its directory (the interpreter's path says little), the
// arguments as they are.
std::string command_text(const JobProcess& p, bool redact) {
    std::vector<std::string> argv = shown_argv(p, redact);
    if (auto slash = argv[0].rfind('/'); slash != std::string::npos && slash + 1 < argv[0].size())
        argv[0] = argv[0].substr(slash + 1);
    return join_argv(argv);
}

std::string what_text(const JobProcess& p) {
    if (p.role == JobRole::Agent) return "torchrun agent";
    if (p.role == JobRole::Cuda) return "CUDA process";
    return fmt::format("{}rank {}", p.job ? "  " : "", *p.ranks.rank);
}

std::string rank_text(const JobProcess& p) {
    if (p.role != JobRole::Rank) return "-";
    std::string text = std::to_string(*p.ranks.rank);
    if (p.ranks.world_size) text += fmt::format("/{}", *p.ranks.world_size);
    if (p.ranks.local_rank) text += fmt::format(" (local {})", *p.ranks.local_rank);
    return text;
}

size_t command_width(size_t used) {
    winsize ws{};
    if (!isatty(STDOUT_FILENO) || ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) != 0 || ws.ws_col == 0) return kPipedCommandChars;
    return std::max(kMinCommandChars, ws.ws_col > used ? ws.ws_col - used : 0);
}

void print_table(const std::vector<JobProcess>& jobs, bool redact) {
    constexpr const char* kRow = "{:<8} {:<8} {:<14} {:<15} {}\n";
    constexpr size_t kCommandColumn = 8 + 1 + 8 + 1 + 14 + 1 + 15 + 1;
    size_t width = command_width(kCommandColumn);
    print_safe(stdout, kRow, "PID", "PPID", "RANK", "WHAT", "COMMAND");
    for (const auto& p : jobs)
        print_safe(stdout, kRow, p.pid, p.ppid, rank_text(p), what_text(p), truncate_chars(command_text(p, redact), width));
    const bool any_agent = std::any_of(jobs.begin(), jobs.end(), [](const JobProcess& p) { return p.role == JobRole::Agent; });
    print_safe(stdout, "\nTrace a job with: gtrace attach --pid {} (the process and everything under it, "
               "started later too)\n", any_agent ? "<the torchrun agent's PID>" : "<PID>");
}

nlohmann::json to_json(const std::vector<JobProcess>& jobs, bool redact) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& p : jobs) {
        auto optional = [](const std::optional<int>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); };
        list.push_back({{"pid", p.pid}, {"ppid", p.ppid}, {"role", role_name(p.role)},
                        {"job", p.job ? nlohmann::json(p.job) : nlohmann::json()}, {"rank", optional(p.ranks.rank)},
                        {"local_rank", optional(p.ranks.local_rank)}, {"world_size", optional(p.ranks.world_size)},
                        {"cuda", p.cuda}, {"argv", shown_argv(p, redact)}});
    }
    return {{"processes", list}};
}

} // namespace

Result<void> run_ps(const PsOptions& options) {
    std::vector<JobProcess> jobs = find_jobs(getpid());
    const bool as_user = geteuid() != 0;
    if (as_user)
        print_safe(stderr, "gtrace: note: not root: other users' processes are shown only when their command line names "
                           "torchrun; run as root (or with sudo) to see their ranks and CUDA libraries\n");
    if (options.json) {
        std::cout << to_json(jobs, options.redact).dump(2) << "\n";
        return {};
    }
    if (jobs.empty()) {
        print_safe(stdout, "no jobs found: no torchrun agent, no process with RANK in its environment, and no process with "
                   "libcudart or libcuda loaded{}\n", as_user ? " among those gtrace could read" : "");
        return {};
    }
    print_table(jobs, options.redact);
    return {};
}

} // namespace gtrace
