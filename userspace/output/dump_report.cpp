#include "output/dump_report.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "foundation/printable.h"

namespace gtrace {
namespace {

// "rank 0", "rank 2" -> "ranks 0,2"; other owners listed as they are.
std::string owners_label(const std::set<std::string>& owners) {
    std::vector<std::string> ranks, others;
    for (const auto& o : owners) {
        if (o.starts_with("rank ") && o.find(' ', 5) == std::string::npos) ranks.push_back(o.substr(5));
        else others.push_back(o);
    }
    std::string out;
    if (!ranks.empty()) {
        std::sort(ranks.begin(), ranks.end(), [](const std::string& a, const std::string& b) { return std::stoi(a) < std::stoi(b); });
        out = fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", fmt::join(ranks, ","));
    }
    for (const auto& o : others) out += (out.empty() ? "" : ", ") + o;
    return out;
}

std::string blocking_call(const DumpedThread& t) {
    if (!t.python.empty()) {
        std::string s = fmt::format("in {}", t.python.front());
        if (!t.caller.empty() && t.caller != t.python.front()) s += fmt::format(", called from {}", t.caller);
        else if (t.caller.empty() && t.python.size() > 1) s += fmt::format(", called from {}", t.python[1]);
        if (!t.native.empty()) s += fmt::format("; native: {}", t.native.front());
        return s;
    }
    if (!t.native.empty()) return fmt::format("in {}", t.native.front());
    return t.error.empty() ? "no stack" : t.error;
}

// Every text of a thread comes from its process (command line, thread name, file and function
// names): escaped before it reaches a terminal.
DumpedThread printable_thread(DumpedThread t) {
    t.owner = printable(t.owner);
    t.thread_name = printable(t.thread_name);
    for (auto* frames : {&t.python, &t.native})
        for (auto& f : *frames) f = printable(f);
    t.error = printable(t.error);
    t.caller = printable(t.caller);
    return t;
}

} // namespace

std::string format_dump(const std::string& heading, const std::vector<DumpedThread>& dumped) {
    std::vector<DumpedThread> threads;
    threads.reserve(dumped.size());
    for (const auto& t : dumped) threads.push_back(printable_thread(t));
    std::string out = heading + "\n\n";
    for (const auto& t : threads)
        if (t.is_rank_main) out += fmt::format("{}: {}\n", t.owner, blocking_call(t));

    struct Group {
        std::set<std::string> owners;
        std::set<std::string> names;
        size_t threads = 0;
        const DumpedThread* sample = nullptr;
    };
    std::map<std::string, Group> groups; // by stack text
    std::vector<std::string> order;
    for (const auto& t : threads) {
        std::string key = fmt::format("{}\n--\n{}\n--\n{}", fmt::join(t.python, "\n"), fmt::join(t.native, "\n"), t.error);
        auto [it, inserted] = groups.try_emplace(key);
        if (inserted) order.push_back(key);
        Group& g = it->second;
        g.owners.insert(t.owner);
        g.names.insert(t.thread_name);
        g.threads++;
        if (!g.sample) g.sample = &t;
    }
    for (const auto& key : order) {
        const Group& g = groups[key];
        out += fmt::format("\n── {} ({} thread{}: {})\n", owners_label(g.owners), g.threads, g.threads == 1 ? "" : "s",
                           fmt::join(g.names, ", "));
        if (!g.sample->error.empty()) out += fmt::format("  ({})\n", g.sample->error);
        if (!g.sample->python.empty()) {
            out += "  Python, innermost first:\n";
            for (const auto& f : g.sample->python) out += fmt::format("    {}\n", f);
        }
        if (!g.sample->native.empty()) {
            out += "  native:\n";
            for (const auto& f : g.sample->native) out += fmt::format("    {}\n", f);
        }
    }
    return out;
}

} // namespace gtrace
