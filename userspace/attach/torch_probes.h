// Finds the libtorch each process mapped (Debian's, a pip wheel's, a conda one) and puts the
// record_function probes on it: the call sites that construct user-scope RecordFunctions and
// those that end them explicitly (or, where the code cannot be analysed, the constructor, end()
// and destructor themselves), and record_function_enter_new where it exists (torch 2.x); and on
// libtorch_python, the entry and ret instructions of THPEngine_run_backward (backward passes);
// with --autograd-links, where autograd numbers and runs its nodes (gtrace/torch_ranges.h).
// One set of probes per file.
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "attach/bpf_session.h"
#include "attach/library_scan.h"
#include <nlohmann/json.hpp>

#include "foundation/elf_symbols.h"
#include "foundation/result.h"
#include "discover/proc_maps.h"

namespace gtrace {

class TorchProbes {
public:
    TorchProbes(BpfSession& bpf, TargetFiles& files, bool autograd_links) : bpf_(bpf), files_(files), autograd_links_(autograd_links) {}

    // Probe the libtorch files among a process's mappings; returns how many new files got probes.
    Result<int> scan_maps(int pid, const std::vector<Mapping>& maps);
    // Files probed and how (call sites or entries, how many), for the capture's facts.
    nlohmann::json facts() const;

private:
    struct Plan {
        std::vector<ApiProbeSite> sites;
        bool at_call_sites = false;
        size_t begin_sites = 0, end_sites = 0;
        std::string why_entries; // why the entries are probed instead of call sites
        size_t backward_return_sites = 0; // THPEngine_run_backward's rets (0: not in this file)
        size_t autograd_link_sites = 0;   // sequence number and node sites (0: none, or not asked)
        uint64_t node_sequence_offset = 0; // read from libtorch_python (0: the default, GT_TORCH_NODE_SEQUENCE_OFFSET)
    };
    struct Probed {
        std::string path;
        Plan plan; // without its sites
    };
    // node_offset: where this install's autograd Node keeps sequence_nr_ (0: the default).
    static Plan plan(const std::string& path, const ElfSymbols& syms, bool autograd_links, uint64_t node_offset);
    static void plan_backward(const std::string& path, const ElfSymbols& syms, Plan& plan);
    static void plan_autograd_links(const std::string& path, const ElfSymbols& syms, Plan& plan, uint64_t node_offset);
    uint64_t node_sequence_offset(int pid, const Mapping& libtorch);

    BpfSession& bpf_;
    TargetFiles& files_;
    bool autograd_links_;
    std::map<std::pair<uint64_t, uint64_t>, Probed> probed_; // (dev, inode) -> how it is probed
    LibraryScan libraries_;
    std::vector<UprobeLink> links_;
};

} // namespace gtrace
