// Processes a capture left out, and why: one that another user owns (a privileged gtrace traces
// only its caller's), one whose files hang (a file system that never answers), one whose maps,
// libraries or records broke a step of gtrace's. A hostile or broken process costs only itself:
// it is untracked, counted here (otherData.processes_skipped, a summary line), and the capture goes on.
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace gtrace {

class SkippedProcesses {
public:
    // Records the first reason given for `pid`; true when it is new (the caller warns once).
    bool skip(uint32_t pid, const std::string& reason) {
        if (reasons_.size() >= kMaxKept && !reasons_.contains(pid)) {
            ++beyond_;
            return false;
        }
        return reasons_.emplace(pid, reason).second;
    }
    bool skipped(uint32_t pid) const { return reasons_.contains(pid); }
    size_t count() const { return reasons_.size() + beyond_; }
    // A process of that PID exec'ed or the PID was reused: it is judged again.
    void forget(uint32_t pid) { reasons_.erase(pid); }

    // [{"pid", "reason"}...], plus {"more": N} past the bound.
    nlohmann::json facts() const {
        nlohmann::json out = nlohmann::json::array();
        for (const auto& [pid, reason] : reasons_) out.push_back({{"pid", pid}, {"reason", reason}});
        if (beyond_) out.push_back({{"more", beyond_}});
        return out;
    }

private:
    static constexpr size_t kMaxKept = 4096; // a fork bomb of hostile processes costs a bounded list
    std::map<uint32_t, std::string> reasons_;
    uint64_t beyond_ = 0;
};

} // namespace gtrace
