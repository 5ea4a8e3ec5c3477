// Finds the libtorch each process mapped that holds c10d (libtorch_cpu for gloo and MPI,
// libtorch_cuda for NCCL, or a monolithic libtorch), and the libnccl.so.2 it mapped, and probes
// c10d's collectives and Work::wait, and NCCL's API, at their entries and at their own ret
// instructions (gtrace/comm.h says why not return probes). c10d's functions are found by their
// mangled names — c10d::ProcessGroup<Backend>::<method> for the methods of gtrace/comm.h, and
// every c10d class's Work…::wait — so torch 1.13 and 2.x (ProcessGroupNCCL as a c10d::Backend)
// match alike; NCCL's by nccl<Name> or its twin pnccl<Name> (the pip wheel's strong symbol, the
// other a weak alias at the same address). One set of probes per file.
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "attach/bpf_session.h"
#include "attach/library_scan.h"
#include "discover/proc_maps.h"
#include "foundation/elf_symbols.h"
#include "foundation/result.h"

namespace gtrace {

// What a mangled name is to the collective probes: a backend's collective (its enum gt_comm_site
// cookie without the site kind), a wait, or neither.
struct CommSymbol {
    enum Kind { None, Collective, Wait, Nccl } kind = None;
    uint64_t cookie = 0; // op << 8 | backend << 16 | flags << 24; NCCL: api << 8 | layout << 16
};
CommSymbol classify_comm_symbol(std::string_view mangled);

class CommProbes {
public:
    CommProbes(BpfSession& bpf, TargetFiles& files) : bpf_(bpf), files_(files) {}

    // Probe the c10d libraries among a process's mappings; returns how many new files got probes.
    Result<int> scan_maps(int pid, const std::vector<Mapping>& maps);
    // Files probed and how many collectives and waits, for the capture's facts.
    nlohmann::json facts() const;

private:
    struct Probed {
        std::string path;
        size_t collectives = 0, waits = 0, nccl_calls = 0, return_sites = 0;
        std::vector<std::string> without_ret; // functions left out: no ret instruction to see them end
    };
    static std::vector<ApiProbeSite> plan(const std::string& path, const ElfSymbols& syms, Probed& probed);

    BpfSession& bpf_;
    TargetFiles& files_;
    std::map<std::pair<uint64_t, uint64_t>, Probed> probed_; // (dev, inode) -> what was probed
    LibraryScan libraries_;
    std::vector<UprobeLink> links_;
};

} // namespace gtrace
