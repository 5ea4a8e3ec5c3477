// The libraries a set of probes looks for in processes' mappings, each file looked at once
// however many processes map it (a file is known by device and inode, opened as the process
// maps it: a container's libraries too).
#pragma once
#include <cstdint>
#include <cstdio>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "discover/proc_maps.h"
#include "discover/target_files.h"
#include "foundation/input_file.h"
#include "foundation/printable.h"
#include "foundation/result.h"

namespace gtrace {

class LibraryScan {
public:
    using FileKey = std::pair<uint64_t, uint64_t>; // st_dev, st_ino
    // Probes one file: true when probed, false when it is not one after all (looked at once);
    // an error is warned on stderr and the file left alone, unless it is a Privileges error.
    using Probe = std::function<Result<bool>(const InputFile& file, const Mapping& mapping, FileKey key)>;

    // Calls `probe` for each executable file mapping of `pid` that `wanted(path)` picks and that
    // no earlier scan looked at, opened as the process maps it (discover/target_files.h).
    // Returns how many files were probed.
    Result<int> scan(int pid, const std::vector<Mapping>& maps, TargetFiles& files,
                     const std::function<bool(const std::string&)>& wanted, const Probe& probe) {
        int added = 0;
        auto opened = files.open_mapped(pid, maps, [&](const Mapping& m) {
            return m.executable && !seen_.contains({m.dev, m.inode}) && wanted(m.path);
        });
        for (const OpenedMapping& o : opened) {
            FileKey key{static_cast<uint64_t>(o.file.stat().st_dev), static_cast<uint64_t>(o.file.stat().st_ino)};
            if (!seen_.insert(key).second) continue; // probed, or not a candidate: not retried for every event
            auto probed = probe(o.file, o.mapping, key);
            if (!probed) {
                if (probed.error().code == ExitCode::Privileges) return probed.error();
                fprintf(stderr, "gtrace: warning: %s\n", printable(probed.error().message).c_str());
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
