#include "discover/proc_tree.h"

#include <dirent.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <map>
#include <sstream>
#include <unordered_map>

#include "foundation/input_file.h"
#include "foundation/numbers.h"

namespace gtrace {
namespace {

// /proc files of processes that may be hostile: the kernel bounds them (argv and environ
// together to 6 MiB), and so does this.
std::string read_file(const std::string& path) {
    constexpr size_t kMaxProcFileBytes = 8u << 20;
    return read_input_file(path, kMaxProcFileBytes);
}

std::vector<int> numeric_entries(const std::string& dir) {
    std::vector<int> out;
    DIR* d = opendir(dir.c_str());
    if (!d) return out;
    while (dirent* e = readdir(d)) {
        int v = 0;
        const char* end = e->d_name + strlen(e->d_name);
        auto [p, ec] = std::from_chars(e->d_name, end, v);
        if (ec == std::errc() && p == end) out.push_back(v);
    }
    closedir(d);
    return out;
}

std::optional<int> parse_int(const std::string& s) {
    int v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
    return v;
}

} // namespace

std::optional<ProcStat> read_proc_stat(int pid, int tid) {
    std::string path = tid ? "/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/stat"
                           : "/proc/" + std::to_string(pid) + "/stat";
    std::string text = read_file(path);
    // The comm field is parenthesised and may itself contain spaces and parentheses.
    auto open = text.find('(');
    auto close = text.rfind(')');
    if (open == std::string::npos || close == std::string::npos || close < open) return std::nullopt;
    ProcStat st;
    auto pid_field = parse_decimal<int>(std::string_view(text).substr(0, open > 0 ? open - 1 : 0));
    if (!pid_field) return std::nullopt;
    st.pid = *pid_field;
    st.comm = text.substr(open + 1, close - open - 1);
    std::istringstream rest(text.substr(close + 2));
    std::vector<std::string> f;
    for (std::string tok; rest >> tok;) f.push_back(tok);
    // f[0] is field 3 (state); field N is f[N-3].
    if (f.size() < 20) return std::nullopt;
    st.state = f[0].empty() ? '?' : f[0][0];
    auto ppid = parse_decimal<int>(f[1]);
    auto flags = parse_decimal<unsigned long>(f[6]);
    auto start = parse_decimal<uint64_t>(f[19]);
    if (!ppid || !flags || !start) return std::nullopt;
    st.ppid = *ppid, st.flags = *flags, st.start_time_ticks = *start;
    if (f.size() > 36)
        if (auto cpu = parse_decimal<int>(f[36])) st.processor = *cpu; // field 39
    return st;
}

std::vector<std::string> read_argv(int pid) {
    std::string raw = read_file("/proc/" + std::to_string(pid) + "/cmdline");
    while (!raw.empty() && raw.back() == '\0') raw.pop_back();
    std::vector<std::string> argv;
    if (raw.empty()) return argv;
    for (size_t pos = 0;;) {
        size_t end = raw.find('\0', pos);
        argv.push_back(raw.substr(pos, end == std::string::npos ? std::string::npos : end - pos));
        if (end == std::string::npos) break;
        pos = end + 1;
    }
    return argv;
}

std::string join_argv(const std::vector<std::string>& argv) {
    std::string out;
    for (const auto& a : argv) {
        if (!out.empty()) out += ' ';
        out += a;
    }
    return out;
}

std::string read_cmdline(int pid) { return join_argv(read_argv(pid)); }

std::unordered_map<std::string, std::string> read_environ(int pid) {
    std::unordered_map<std::string, std::string> env;
    std::string raw = read_file("/proc/" + std::to_string(pid) + "/environ");
    size_t pos = 0;
    while (pos < raw.size()) {
        size_t end = raw.find('\0', pos);
        if (end == std::string::npos) end = raw.size();
        std::string_view kv(raw.data() + pos, end - pos);
        if (auto eq = kv.find('='); eq != std::string_view::npos && eq > 0)
            env.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
        pos = end + 1;
    }
    return env;
}

RankEnv read_rank_env(int pid) {
    auto env = read_environ(pid);
    auto number = [&](const char* name) -> std::optional<int> {
        auto it = env.find(name);
        return it == env.end() ? std::nullopt : parse_int(it->second);
    };
    return {number("RANK"), number("LOCAL_RANK"), number("WORLD_SIZE")};
}

std::vector<int> list_processes() { return numeric_entries("/proc"); }

std::vector<int> list_tree(int root, int exclude) {
    std::multimap<int, int> children;
    for (int pid : list_processes())
        if (auto st = read_proc_stat(pid)) children.emplace(st->ppid, pid);
    std::vector<int> out{root};
    for (size_t i = 0; i < out.size(); ++i) {
        auto [b, e] = children.equal_range(out[i]);
        for (auto it = b; it != e; ++it)
            if (it->second != exclude) out.push_back(it->second);
    }
    return out;
}

std::optional<uint32_t> read_real_uid(int pid) {
    auto c = read_credentials(pid);
    return c ? std::optional<uint32_t>(c->real_uid()) : std::nullopt;
}

namespace {

// The numbers after "\nNAME:" in a status text, up to `max` of them.
std::optional<std::vector<uint32_t>> status_numbers(std::string_view status, std::string_view name, size_t min, size_t max) {
    std::string key = "\n" + std::string(name) + ":";
    size_t at = status.find(key);
    if (at == std::string_view::npos) return std::nullopt;
    size_t eol = status.find('\n', at + 1);
    std::string_view line = status.substr(at + key.size(), eol == std::string_view::npos ? std::string_view::npos : eol - at - key.size());
    std::vector<uint32_t> out;
    for (size_t pos = 0; pos < line.size() && out.size() < max;) {
        while (pos < line.size() && (line[pos] == ' ' || line[pos] == '\t')) ++pos;
        size_t end = pos;
        while (end < line.size() && line[end] != ' ' && line[end] != '\t') ++end;
        if (end == pos) break;
        auto v = parse_decimal<uint32_t>(line.substr(pos, end - pos));
        if (!v) return std::nullopt;
        out.push_back(*v);
        pos = end;
    }
    if (out.size() < min) return std::nullopt;
    return out;
}

} // namespace

std::optional<ProcCredentials> parse_credentials(std::string_view status) {
    auto uids = status_numbers(status, "Uid", 4, 4), gids = status_numbers(status, "Gid", 4, 4);
    auto groups = status_numbers(status, "Groups", 0, 65536);
    if (!uids || !gids) return std::nullopt;
    ProcCredentials c;
    std::copy(uids->begin(), uids->end(), c.uid);
    std::copy(gids->begin(), gids->end(), c.gid);
    if (groups) c.groups = std::move(*groups);
    return c;
}

std::optional<ProcCredentials> read_credentials(int pid) {
    return parse_credentials(read_file("/proc/" + std::to_string(pid) + "/status"));
}

std::vector<int> list_threads(int pid) { return numeric_entries("/proc/" + std::to_string(pid) + "/task"); }

std::string read_thread_name(int pid, int tid) {
    std::string name = read_file("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/comm");
    while (!name.empty() && (name.back() == '\n' || name.back() == '\0')) name.pop_back();
    return name;
}

std::string short_command(const std::string& cmdline, size_t max_len) {
    std::istringstream in(cmdline);
    std::string out, word;
    bool first = true;
    while (in >> word) {
        if (first) {
            // "/usr/bin/python3.11" -> "python3.11": the directory says little in a label.
            auto slash = word.rfind('/');
            if (slash != std::string::npos) word = word.substr(slash + 1);
            first = false;
        } else {
            out += ' ';
        }
        out += word;
        if (out.size() > max_len) {
            out = out.substr(0, max_len - 1) + "…";
            break;
        }
    }
    return out;
}

} // namespace gtrace
