#include "attach/torch_probes.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <unordered_set>

#include "attach/call_sites.h"
#include "discover/proc_tree.h"
#include "foundation/elf_symbols.h"
#include "foundation/input_file.h"
#include "gtrace/torch_ranges.h"

namespace gtrace {
namespace {

constexpr const char* kCtor[] = {"_ZN2at14RecordFunctionC1ENS_11RecordScopeE", "_ZN2at14RecordFunctionC2ENS_11RecordScopeE"};
constexpr const char* kEnd = "_ZN2at14RecordFunction3endEv";
constexpr const char* kDtor[] = {"_ZN2at14RecordFunctionD1Ev", "_ZN2at14RecordFunctionD2Ev"};
// record_function_enter_new took a c10::optional before torch 2.1 and a std::optional since.
constexpr const char* kEnterNew[] = {
    "_ZN5torch8autograd8profiler25record_function_enter_newERKNSt7__cxx1112basic_stringIcSt11char_"
    "traitsIcESaIcEEERKN3c108optionalIS7_EE",
    "_ZN5torch8autograd8profiler25record_function_enter_newERKNSt7__cxx1112basic_stringIcSt11char_"
    "traitsIcESaIcEEERKSt8optionalIS7_E",
};

// Where Python's backward() and autograd.grad() enter the engine (libtorch_python:
// torch/csrc/autograd/python_engine.cpp): exported in torch 1.13 (_Z...), a static function in
// .symtab in 2.x (_ZL..., checked on pip torch 2.15).
constexpr const char* kRunBackwardNames[] = {"_Z22THPEngine_run_backwardP7_objectS0_S0_", "_ZL22THPEngine_run_backwardP7_objectS0_S0_"};
// GCC moves a function's unlikely paths to NAME.cold (in .symtab): their rets end it too.
constexpr const char* kRunBackwardColdNames[] = {"_Z22THPEngine_run_backwardP7_objectS0_S0_.cold",
                                                 "_ZL22THPEngine_run_backwardP7_objectS0_S0_.cold"};

// --autograd-links (libtorch_cpu, torch 1.13 and 2.x, exported): where a forward op's node gets
// its sequence number (ATen/SequenceNumber.cpp), and where the engine runs a node (engine.cpp).
constexpr const char* kSequenceNumber = "_ZN2at15sequence_number17get_and_incrementEv";
constexpr const char* kEvaluateFunction =
    "_ZN5torch8autograd6Engine17evaluate_functionERSt10shared_ptrINS0_9GraphTaskEEPNS0_4NodeERNS0_11InputBufferERKS2_INS0_"
    "10ReadyQueueEE";

const std::unordered_set<std::string_view>& site_symbols() {
    static const std::unordered_set<std::string_view> names = [] {
        std::unordered_set<std::string_view> n = {kEnd, kSequenceNumber, kEvaluateFunction};
        for (auto* list : {&kRunBackwardNames, &kRunBackwardColdNames})
            for (const char* name : *list) n.insert(name);
        for (auto* list : {&kCtor, &kDtor, &kEnterNew})
            for (const char* name : *list) n.insert(name);
        return n;
    }();
    return names;
}

// RecordFunction lives in libtorch_cpu (split builds) or libtorch (older monolithic ones); the
// Python engine in libtorch_python.
bool is_torch_library(const std::string& path) {
    std::string file = std::filesystem::path(path).filename().string();
    return file.starts_with("libtorch_cpu.so") || file.starts_with("libtorch.so") || file.starts_with("libtorch_python.so");
}

void add_entry(const ElfSymbols& syms, const char* name, gt_torch_site site, std::vector<ApiProbeSite>& out,
               std::set<uint64_t>& offsets) {
    const ElfSymbol* sym = syms.find(name);
    auto offset = sym ? syms.vaddr_to_offset(sym->vaddr) : std::nullopt;
    if (offset && offsets.insert(*offset).second) out.push_back({*offset, static_cast<uint64_t>(site)});
}

} // namespace

// Where a range begins and ends. Function entries are hit by every RecordFunction libtorch makes
// — one per autograd node, hundreds per step — so the probes go on the call sites instead: the
// constructor's callers that may pass USER_SCOPE (BPF still checks the scope), and the callers of
// end() other than the destructor (user ranges are ended explicitly; other guards end in their
// destructor). When the code cannot be analysed, the entries are probed as before.
TorchProbes::Plan TorchProbes::plan(const std::string& path, const ElfSymbols& syms, bool autograd_links, uint64_t node_offset) {
    Plan plan;
    plan_backward(path, syms, plan);
    if (autograd_links) plan_autograd_links(path, syms, plan, node_offset);
    if (!syms.find(kCtor[0]) && !syms.find(kCtor[1])) return plan; // libtorch_python, or libtorch.so of split builds
    std::set<uint64_t> offsets;
    for (const char* name : kEnterNew) add_entry(syms, name, GT_TORCH_RANGE_NAME, plan.sites, offsets);
    std::vector<std::string> wanted = {kCtor[0], kCtor[1], kEnd};
    auto found = find_call_sites(path, wanted);
    std::set<uint64_t> dtors;
    for (const char* name : kDtor)
        if (const ElfSymbol* d = syms.find(name)) dtors.insert(d->vaddr);
    if (found) {
        size_t begins = 0, ends = 0;
        for (const char* name : kCtor)
            for (const CallSite& c : (*found)[name])
                if ((!c.second_arg || *c.second_arg == GT_TORCH_USER_SCOPE) && offsets.insert(c.offset).second) {
                    plan.sites.push_back({c.offset, GT_TORCH_RANGE_BEGIN});
                    ++begins;
                }
        for (const CallSite& c : (*found)[kEnd])
            if (!dtors.contains(c.function) && offsets.insert(c.offset).second) {
                plan.sites.push_back({c.offset, GT_TORCH_RANGE_END});
                ++ends;
            }
        if (begins && ends) {
            plan.at_call_sites = true;
            plan.begin_sites = begins, plan.end_sites = ends;
            return plan;
        }
        plan.why_entries = "no user-scope call sites found";
    } else {
        plan.why_entries = found.error().message;
    }
    std::erase_if(plan.sites, [](const ApiProbeSite& s) { return s.cookie == GT_TORCH_RANGE_BEGIN || s.cookie == GT_TORCH_RANGE_END; });
    offsets.clear();
    for (const auto& s : plan.sites) offsets.insert(s.offset);
    for (const char* name : kCtor) add_entry(syms, name, GT_TORCH_RANGE_BEGIN, plan.sites, offsets);
    add_entry(syms, kEnd, GT_TORCH_RANGE_END, plan.sites, offsets);
    for (const char* name : kDtor) add_entry(syms, name, GT_TORCH_RANGE_END, plan.sites, offsets);
    plan.begin_sites = std::count_if(plan.sites.begin(), plan.sites.end(), [](auto& s) { return s.cookie == GT_TORCH_RANGE_BEGIN; });
    plan.end_sites = std::count_if(plan.sites.begin(), plan.sites.end(), [](auto& s) { return s.cookie == GT_TORCH_RANGE_END; });
    return plan;
}

// THPEngine_run_backward's entry and ret instructions; none when it has no ret (its end would
// never be seen) or is not in the file.
void TorchProbes::plan_backward(const std::string& path, const ElfSymbols& syms, Plan& plan) {
    const ElfSymbol* run = nullptr;
    const ElfSymbol* cold = nullptr;
    for (size_t i = 0; i < std::size(kRunBackwardNames) && !run; ++i)
        if ((run = syms.find(kRunBackwardNames[i]))) cold = syms.find(kRunBackwardColdNames[i]);
    auto entry = run ? syms.vaddr_to_offset(run->vaddr) : std::nullopt;
    if (!entry) return;
    std::vector<std::pair<uint64_t, uint64_t>> parts = {{run->vaddr, run->size}};
    if (cold) parts.emplace_back(cold->vaddr, cold->size);
    auto rets = find_return_sites(path, parts);
    if (!rets || (*rets)[run->vaddr].empty()) return;
    plan.sites.push_back({*entry, GT_TORCH_BACKWARD});
    for (const auto& part : parts)
        for (uint64_t r : (*rets)[part.first]) {
            plan.sites.push_back({r, GT_TORCH_BACKWARD_RET});
            ++plan.backward_return_sites;
        }
}

// The ret instructions of get_and_increment (the number in rax), and evaluate_function's entry
// and rets; all or none (a node whose end is never seen would swallow the calls after it).
void TorchProbes::plan_autograd_links(const std::string& path, const ElfSymbols& syms, Plan& plan, uint64_t node_offset) {
    const ElfSymbol* number = syms.find(kSequenceNumber);
    const ElfSymbol* evaluate = syms.find(kEvaluateFunction);
    if (!number || !evaluate) return;
    auto rets = find_return_sites(path, {{number->vaddr, number->size}, {evaluate->vaddr, evaluate->size}});
    auto entry = syms.vaddr_to_offset(evaluate->vaddr);
    if (!rets || !entry || (*rets)[number->vaddr].empty() || (*rets)[evaluate->vaddr].empty()) return;
    for (uint64_t r : (*rets)[number->vaddr]) plan.sites.push_back({r, GT_TORCH_SEQUENCE_RET});
    plan.sites.push_back({*entry, GT_TORCH_NODE | (node_offset << 32)});
    plan.node_sequence_offset = node_offset;
    for (uint64_t r : (*rets)[evaluate->vaddr]) plan.sites.push_back({r, GT_TORCH_NODE_RET});
    plan.autograd_link_sites = (*rets)[number->vaddr].size() + 1 + (*rets)[evaluate->vaddr].size();
}

// The Python getter of a C++ autograd node's sequence number (torch/csrc/autograd/python_cpp_function.cpp,
// torch 2.x): `mov rax, [rdi+cdata]; mov rdi, [rax+OFFSET]; jmp PyLong_FromUnsignedLongLong`.
constexpr const char* kCppSequenceGetter = "_ZN5torch8autograd26THPCppFunction_sequence_nrEP7_objectS2_";

uint64_t TorchProbes::node_sequence_offset(int pid, const Mapping& libtorch) {
    std::string sibling = libtorch.path.substr(0, libtorch.path.rfind('/') + 1) + "libtorch_python.so";
    for (auto& [path, file] : files_.open_in_root(pid, {sibling})) {
        std::unordered_set<std::string_view> only = {kCppSequenceGetter};
        auto syms = ElfSymbols::load(file.fd_path(), &only);
        const ElfSymbol* getter = syms ? (*syms)->find(kCppSequenceGetter) : nullptr;
        if (!getter) return 0; // 1.13 has none: the default
        auto loads = first_load_displacements(file.fd_path(), getter->vaddr, getter->size);
        if (loads.size() >= 2 && loads[1] > 0 && loads[1] <= 256 && loads[1] % 8 == 0) return static_cast<uint64_t>(loads[1]);
    }
    return 0;
}

Result<int> TorchProbes::scan_maps(int pid, const std::vector<Mapping>& maps) {
    return libraries_.scan(pid, maps, files_, is_torch_library, [this, pid](const InputFile& file, const Mapping& m, LibraryScan::FileKey key) -> Result<bool> {
        auto syms = ElfSymbols::load(file.fd_path(), &site_symbols());
        if (!syms) return false;
        uint64_t node_offset = autograd_links_ && (*syms)->find(kEvaluateFunction) ? node_sequence_offset(pid, m) : 0;
        Plan plan = this->plan(file.fd_path(), **syms, autograd_links_, node_offset);
        // libtorch.so of split builds: RecordFunction is in libtorch_cpu; the engine in libtorch_python.
        if ((!plan.begin_sites || !plan.end_sites) && !plan.backward_return_sites && !plan.autograd_link_sites) return false;
        if (!plan.begin_sites || !plan.end_sites) // the backward and autograd sites alone (planned only whole)
            std::erase_if(plan.sites, [](const ApiProbeSite& s) { return s.cookie == GT_TORCH_RANGE_BEGIN || s.cookie == GT_TORCH_RANGE_END || s.cookie == GT_TORCH_RANGE_NAME; });
        auto links = bpf_.attach_torch_probes(file.fd_path(), m.path, plan.sites);
        if (!links) return links.error();
        for (auto& l : *links) links_.push_back(std::move(l));
        plan.sites.clear();
        probed_.emplace(key, Probed{m.path, std::move(plan)});
        return true;
    });
}

nlohmann::json TorchProbes::facts() const {
    nlohmann::json files = nlohmann::json::array();
    for (const auto& [key, p] : probed_) {
        nlohmann::json f = {{"path", p.path}};
        if (p.plan.begin_sites && p.plan.end_sites) {
            f["probed_at"] = p.plan.at_call_sites ? "call_sites" : "function_entries";
            f["begin_sites"] = p.plan.begin_sites, f["end_sites"] = p.plan.end_sites;
            if (!p.plan.at_call_sites) f["why_not_call_sites"] = p.plan.why_entries;
        }
        if (p.plan.backward_return_sites) f["backward_return_sites"] = p.plan.backward_return_sites;
        if (p.plan.autograd_link_sites) {
            f["autograd_link_sites"] = p.plan.autograd_link_sites;
            f["node_sequence_offset"] = p.plan.node_sequence_offset ? p.plan.node_sequence_offset : GT_TORCH_NODE_SEQUENCE_OFFSET;
            f["node_sequence_offset_from"] = p.plan.node_sequence_offset ? "libtorch_python's THPCppFunction_sequence_nr" : "the default (torch 1.13)";
        }
        files.push_back(std::move(f));
    }
    return files;
}

} // namespace gtrace
