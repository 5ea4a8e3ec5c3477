// Finds every ELF object that exports the CUDA runtime or driver API — by symbol, whatever its
// path (system CUDA, pip wheels, conda, cudart linked statically into an executable) — and
// attaches one entry/return uprobe pair per API per object file. A file's probes serve every
// process that maps it, now or later; BPF keeps only the tracked tree.
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "attach/bpf_session.h"
#include "discover/proc_maps.h"
#include "foundation/input_file.h"
#include "foundation/result.h"

namespace gtrace {

struct ProbedObject {
    std::string path;
    std::vector<std::string> apis; // symbols probed in it
    bool mapped = false;           // seen mapped by a tracked process (not only a candidate)
};

class CudaProbes {
public:
    explicit CudaProbes(BpfSession& bpf) : bpf_(bpf) {}

    // Probe every CUDA-exporting object in a process's mappings. Returns how many new objects
    // got probes. Files that vanished meanwhile are skipped.
    Result<int> scan_maps(int pid, const std::vector<Mapping>& maps);
    // Probe the CUDA libraries this process could dlopen later (its LD_LIBRARY_PATH, the
    // loader cache, the CUDA toolkit), so calls right after a dlopen are not missed.
    Result<int> probe_candidates(int pid);

    bool any_mapped() const;
    const std::map<std::pair<uint64_t, uint64_t>, ProbedObject>& objects() const { return objects_; }

private:
    Result<int> probe_file(const InputFile& file, const std::string& shown_path, bool mapped);

    BpfSession& bpf_;
    std::map<std::pair<uint64_t, uint64_t>, ProbedObject> objects_; // by (dev, inode)
    std::set<std::pair<uint64_t, uint64_t>> not_cuda_;              // scanned, exports nothing
    std::vector<UprobeLink> links_;
    std::set<std::string> candidate_dirs_seen_;
};

} // namespace gtrace
