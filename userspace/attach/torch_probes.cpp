#include "attach/torch_probes.h"

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <unordered_set>

#include "discover/proc_tree.h"
#include "foundation/elf_symbols.h"
#include "foundation/input_file.h"
#include "gtrace/torch_ranges.h"

namespace gtrace {
namespace {

struct TorchSite {
    const char* symbol;
    gt_torch_site site;
};

// Itanium-mangled names, stable from torch 1.13 to 2.x. record_function_enter_new took a
// c10::optional before torch 2.1 and a std::optional since.
constexpr TorchSite kSites[] = {
    {"_ZN2at14RecordFunctionC1ENS_11RecordScopeE", GT_TORCH_RANGE_BEGIN},
    {"_ZN2at14RecordFunctionC2ENS_11RecordScopeE", GT_TORCH_RANGE_BEGIN},
    {"_ZN2at14RecordFunction3endEv", GT_TORCH_RANGE_END},
    {"_ZN2at14RecordFunctionD1Ev", GT_TORCH_RANGE_END},
    {"_ZN2at14RecordFunctionD2Ev", GT_TORCH_RANGE_END},
    {"_ZN5torch8autograd8profiler25record_function_enter_newERKNSt7__cxx1112basic_stringIcSt11char_"
     "traitsIcESaIcEEERKN3c108optionalIS7_EE",
     GT_TORCH_RANGE_NAME},
    {"_ZN5torch8autograd8profiler25record_function_enter_newERKNSt7__cxx1112basic_stringIcSt11char_"
     "traitsIcESaIcEEERKSt8optionalIS7_E",
     GT_TORCH_RANGE_NAME},
};

const std::unordered_set<std::string_view>& site_symbols() {
    static const std::unordered_set<std::string_view> names = [] {
        std::unordered_set<std::string_view> n;
        for (const auto& s : kSites) n.insert(s.symbol);
        return n;
    }();
    return names;
}

// RecordFunction lives in libtorch_cpu (split builds) or libtorch (older monolithic ones).
bool is_torch_library(const std::string& path) {
    std::string file = std::filesystem::path(path).filename().string();
    return file.starts_with("libtorch_cpu.so") || file.starts_with("libtorch.so");
}

} // namespace

Result<int> TorchProbes::scan_maps(int pid, const std::vector<Mapping>& maps) {
    int added = 0;
    for (const Mapping& m : maps) {
        if (!m.executable || !m.is_file() || !is_torch_library(m.path)) continue;
        auto file = open_input_file(path_in_process_root(pid, m.path)); // a regular file only
        if (!file) continue;
        auto key = std::make_pair(static_cast<uint64_t>(file->stat().st_dev), static_cast<uint64_t>(file->stat().st_ino));
        if (probed_.contains(key) || not_torch_.contains(key)) continue;
        not_torch_.insert(key); // until probed: a file that fails is not retried for every event
        auto syms = ElfSymbols::load(file->fd_path(), &site_symbols());
        if (!syms) continue;
        std::vector<ApiProbeSite> sites;
        std::set<uint64_t> offsets; // C1/C2 and D1/D2 are usually one function
        bool begins = false, ends = false;
        for (const auto& s : kSites) {
            const ElfSymbol* sym = (*syms)->find(s.symbol);
            if (!sym) continue;
            auto offset = (*syms)->vaddr_to_offset(sym->vaddr);
            if (!offset || !offsets.insert(*offset).second) continue;
            sites.push_back({*offset, static_cast<uint64_t>(s.site)});
            begins |= s.site == GT_TORCH_RANGE_BEGIN;
            ends |= s.site == GT_TORCH_RANGE_END;
        }
        if (!begins || !ends) continue; // libtorch.so of split builds: RecordFunction is in libtorch_cpu
        auto links = bpf_.attach_torch_probes(file->fd_path(), m.path, sites);
        if (!links) {
            if (links.error().code == ExitCode::Privileges) return links.error();
            fprintf(stderr, "gtrace: warning: %s\n", links.error().message.c_str());
            continue;
        }
        for (auto& l : *links) links_.push_back(std::move(l));
        not_torch_.erase(key);
        probed_.emplace(key, m.path);
        ++added;
    }
    return added;
}

std::vector<std::string> TorchProbes::files() const {
    std::vector<std::string> out;
    for (const auto& [key, path] : probed_) out.push_back(path);
    return out;
}

} // namespace gtrace
