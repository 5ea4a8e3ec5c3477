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
#include "discover/target_files.h"
#include "foundation/input_file.h"
#include "foundation/result.h"

namespace gtrace {

struct ProbedObject {
    std::string path;
    std::string version; // "nvidia-cuda-runtime 13.2.86", "12.4.127", "" (discover/library_version.h)
    std::vector<std::string> apis; // symbols probed in it
    bool mapped = false;           // seen mapped by a tracked process (not only a candidate)
};

class CudaProbes {
public:
    CudaProbes(BpfSession& bpf, TargetFiles& files) : bpf_(bpf), files_(files) {}

    // Probe every CUDA-exporting object in a process's mappings. Returns how many new objects
    // got probes. Files that vanished meanwhile are skipped.
    Result<int> scan_maps(int pid, const std::vector<Mapping>& maps);
    // Probe the CUDA libraries this process could dlopen later (its LD_LIBRARY_PATH, the
    // loader cache, the CUDA toolkit), so calls right after a dlopen are not missed.
    Result<int> probe_candidates(int pid);

    bool any_mapped() const;
    const std::map<std::pair<uint64_t, uint64_t>, ProbedObject>& objects() const { return objects_; }
    // Whether a scan found a CUDA-exporting object in this process's mappings.
    bool maps_cuda(int pid) const { return cuda_pids_.contains(pid); }

    // Takes every probe off (objects found meanwhile are only noted), or puts them all back.
    // Off while every process that can call CUDA has its calls recorded by its agent.
    Result<void> set_attached(bool attached);
    bool attached() const { return attached_; }

private:
    using Key = std::pair<uint64_t, uint64_t>; // (dev, inode)
    struct Sites {
        InputFile file; // kept open: probes go back on through the same inode
        std::string shown_path;
        std::vector<ApiProbeSite> sites;
        std::vector<UprobeLink> links;
    };
    Result<int> probe_file(int pid, InputFile file, const std::string& shown_path, bool mapped);
    Result<bool> attach_sites(Sites& s);

    BpfSession& bpf_;
    TargetFiles& files_;
    std::map<Key, ProbedObject> objects_;
    std::map<Key, Sites> sites_;
    std::set<Key> not_cuda_; // scanned, exports nothing
    std::set<int> cuda_pids_;
    bool attached_ = true;
    std::set<std::string> candidate_dirs_seen_; // "MOUNT_NS\nDIR": looked at once per namespace
};

} // namespace gtrace
