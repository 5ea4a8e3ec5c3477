#include "attach/comm_probes.h"

#include <sys/stat.h>

#include <cctype>
#include <cstdio>
#include <filesystem>

#include "attach/call_sites.h"
#include "format/collective_names.h"
#include "format/nccl_names.h"
#include "discover/proc_tree.h"
#include "foundation/elf_symbols.h"
#include "foundation/input_file.h"
#include "gtrace/comm.h"

namespace gtrace {
namespace {

// c10d's libraries, and NCCL's (the pip wheel's libnccl.so.2, or a system copy).
bool is_comm_library(const std::string& path) {
    std::string file = std::filesystem::path(path).filename().string();
    return file.starts_with("libtorch_cpu.so") || file.starts_with("libtorch_cuda.so") || file.starts_with("libtorch.so") ||
           file.starts_with("libnccl.so");
}

// The <length><identifier> components of an Itanium nested name after "_ZN", up to its 'E';
// empty when the name has anything else (templates, constructors, substitutions) before it.
std::vector<std::string_view> nested_name(std::string_view mangled) {
    std::vector<std::string_view> parts;
    if (!mangled.starts_with("_ZN")) return {};
    size_t i = 3;
    while (i < mangled.size() && std::isdigit(static_cast<unsigned char>(mangled[i]))) {
        size_t len = 0;
        for (; i < mangled.size() && std::isdigit(static_cast<unsigned char>(mangled[i])) && len < 1000; ++i)
            len = len * 10 + static_cast<size_t>(mangled[i] - '0');
        if (len == 0 || i + len > mangled.size()) return {};
        parts.push_back(mangled.substr(i, len));
        i += len;
    }
    if (i >= mangled.size() || mangled[i] != 'E') return {};
    return parts;
}

} // namespace

CommSymbol classify_comm_symbol(std::string_view mangled) {
    if (unsigned api = nccl_api_from_symbol(mangled)) return {CommSymbol::Nccl, uint64_t{api} << 8 | uint64_t{nccl_api_layout(api)} << 16};
    if (!mangled.starts_with("_ZN4c10d")) return {};
    std::vector<std::string_view> parts = nested_name(mangled);
    if (parts.size() < 3 || parts[0] != "c10d") return {};
    // c10d::Work::wait (1.13, 2.x), c10d::ProcessGroup::Work::wait (before), WorkNCCL::wait, …
    if (parts.back() == "wait" && parts[parts.size() - 2].find("Work") != std::string_view::npos) return {CommSymbol::Wait, 0};
    if (parts.size() != 3) return {};
    if (parts[1] == "Reducer" && parts[2] == collective_method(GT_COLL_DDP_GRADIENTS))
        return {CommSymbol::Collective, uint64_t{GT_COLL_DDP_GRADIENTS} << 8 | uint64_t{GT_COLL_RETURNS_VOID} << 24};
    for (unsigned b = 1; b < GT_BACKEND_COUNT; ++b) {
        if (parts[1] != backend_class(b)) continue;
        for (unsigned op = 1; op < GT_COLL_COUNT; ++op)
            if (op != GT_COLL_DDP_GRADIENTS && parts[2] == collective_method(op)) {
                uint64_t flags = op == GT_COLL_MONITORED_BARRIER ? GT_COLL_RETURNS_VOID : 0;
                return {CommSymbol::Collective, uint64_t{op} << 8 | uint64_t{b} << 16 | flags << 24};
            }
    }
    return {};
}

// The entry and every ret instruction of each collective and wait; a function without a ret
// (it leaves by a tail call) is left out: its end would never be seen.
std::vector<ApiProbeSite> CommProbes::plan(const std::string& path, const ElfSymbols& syms, Probed& probed) {
    std::vector<ApiProbeSite> sites;
    std::vector<std::pair<uint64_t, uint64_t>> functions;
    std::map<uint64_t, const ElfSymbol*> by_start; // aliases once
    for (const ElfSymbol& s : syms.all())
        if (by_start.emplace(s.vaddr, &s).second) functions.emplace_back(s.vaddr, s.size);
    auto rets = find_return_sites(path, functions);
    if (!rets) return sites;
    for (const auto& [start, sym] : by_start) {
        CommSymbol c = classify_comm_symbol(sym->name);
        auto entry = syms.vaddr_to_offset(start);
        const std::vector<uint64_t>& ret_offsets = (*rets)[start];
        bool entry_only = c.kind == CommSymbol::Nccl && ((c.cookie >> 8) & 0xff) == GT_NCCL_GROUP_START; // counted at its entry
        if (!entry || (ret_offsets.empty() && !entry_only)) {
            probed.without_ret.push_back(demangle(sym->name));
            continue;
        }
        if (c.kind == CommSymbol::Nccl) {
            sites.push_back({*entry, c.cookie | GT_COMM_SITE_NCCL});
            if (((c.cookie >> 8) & 0xff) != GT_NCCL_GROUP_START) // seen at its entry only
                for (uint64_t r : ret_offsets) sites.push_back({r, (c.cookie & 0xff00) | GT_COMM_SITE_NCCL_RET});
            probed.nccl_calls += 1;
            probed.return_sites += ret_offsets.size();
            continue;
        }
        bool wait = c.kind == CommSymbol::Wait;
        sites.push_back({*entry, c.cookie | (wait ? GT_COMM_SITE_WAIT : GT_COMM_SITE_CALL)});
        for (uint64_t r : ret_offsets) sites.push_back({r, c.cookie | (wait ? GT_COMM_SITE_WAIT_RET : GT_COMM_SITE_CALL_RET)});
        (wait ? probed.waits : probed.collectives) += 1;
        probed.return_sites += ret_offsets.size();
    }
    return sites;
}

Result<int> CommProbes::scan_maps(int pid, const std::vector<Mapping>& maps) {
    // A file without c10d (libtorch.so of split builds) is looked at once.
    return libraries_.scan(pid, maps, files_, is_comm_library, [this](const InputFile& file, const Mapping& m, LibraryScan::FileKey key) -> Result<bool> {
        auto syms = ElfSymbols::load_matching(file.fd_path(), [](std::string_view n) { return classify_comm_symbol(n).kind != CommSymbol::None; });
        if (!syms || !(*syms)->size()) return false;
        Probed probed;
        probed.path = m.path;
        std::vector<ApiProbeSite> sites = plan(file.fd_path(), **syms, probed);
        if (sites.empty()) return false;
        auto links = bpf_.attach_comm_probes(file.fd_path(), m.path, sites);
        if (!links) return links.error();
        for (auto& l : *links) links_.push_back(std::move(l));
        probed_.emplace(key, std::move(probed));
        return true;
    });
}

nlohmann::json CommProbes::facts() const {
    nlohmann::json files = nlohmann::json::array();
    for (const auto& [key, p] : probed_) {
        nlohmann::json f = {{"path", p.path}, {"collectives", p.collectives}, {"waits", p.waits}, {"nccl_calls", p.nccl_calls},
                            {"return_sites", p.return_sites}};
        if (!p.without_ret.empty()) f["without_ret"] = p.without_ret;
        files.push_back(std::move(f));
    }
    return files;
}

} // namespace gtrace
