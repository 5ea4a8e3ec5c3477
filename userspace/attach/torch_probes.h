// Finds the libtorch each process mapped (Debian's, a pip wheel's, a conda one) and puts the
// record_function probes on it: the exported RecordFunction constructor, end() and destructor,
// and record_function_enter_new where it exists (torch 2.x). One set of probes per file.
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "attach/bpf_session.h"
#include "foundation/result.h"
#include "discover/proc_maps.h"

namespace gtrace {

class TorchProbes {
public:
    explicit TorchProbes(BpfSession& bpf) : bpf_(bpf) {}

    // Probe the libtorch files among a process's mappings; returns how many new files got probes.
    Result<int> scan_maps(int pid, const std::vector<Mapping>& maps);
    // Files probed (shown path), for the capture's facts.
    std::vector<std::string> files() const;

private:
    BpfSession& bpf_;
    std::map<std::pair<uint64_t, uint64_t>, std::string> probed_; // (dev, inode) -> path
    std::set<std::pair<uint64_t, uint64_t>> not_torch_;
    std::vector<UprobeLink> links_;
};

} // namespace gtrace
