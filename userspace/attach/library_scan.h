// The libraries a set of probes looks for in processes' mappings, each file looked at once
// however many processes map it (a file is known by device and inode, opened through the
// process's root: a container's libraries too).
#pragma once
#include <cstdint>
#include <cstdio>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "discover/proc_maps.h"
#include "foundation/input_file.h"
#include "foundation/result.h"

namespace gtrace {

class LibraryScan {
public:
    using FileKey = std::pair<uint64_t, uint64_t>; // st_dev, st_ino
    // Probes one file: true when probed, false when it is not one after all (looked at once);
    // an error is warned on stderr and the file left alone, unless it is a Privileges error.
    using Probe = std::function<Result<bool>(const InputFile& file, const Mapping& mapping, FileKey key)>;

    // Calls `probe` for each executable file mapping of `pid` that `wanted(path)` picks and that
    // no earlier scan looked at. Returns how many files were probed.
    Result<int> scan(int pid, const std::vector<Mapping>& maps, const std::function<bool(const std::string&)>& wanted,
                     const Probe& probe) {
        int added = 0;
        for (const Mapping& m : maps) {
            if (!m.executable || !m.is_file() || !wanted(m.path)) continue;
            auto file = open_input_file(path_in_process_root(pid, m.path)); // a regular file only
            if (!file) continue;
            FileKey key{static_cast<uint64_t>(file->stat().st_dev), static_cast<uint64_t>(file->stat().st_ino)};
            if (!seen_.insert(key).second) continue; // probed, or not a candidate: not retried for every event
            auto probed = probe(*file, m, key);
            if (!probed) {
                if (probed.error().code == ExitCode::Privileges) return probed.error();
                fprintf(stderr, "gtrace: warning: %s\n", probed.error().message.c_str());
                continue;
            }
            added += *probed;
        }
        return added;
    }

private:
    std::set<FileKey> seen_;
};

} // namespace gtrace
