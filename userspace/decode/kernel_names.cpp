#include "decode/kernel_names.h"

#include <fmt/format.h>

#include <cstring>

namespace gtrace {
namespace {

const Mapping* find_mapping(const std::vector<Mapping>& maps, uint64_t addr) {
    for (const auto& m : maps)
        if (addr >= m.start && addr < m.end) return &m;
    return nullptr;
}

} // namespace

std::shared_ptr<const ElfSymbols> KernelNames::symbols_for(uint32_t pid, const Mapping& m) {
    auto it = files_.find(m.path);
    if (it != files_.end()) return it->second;
    auto loaded = ElfSymbols::load(path_in_process_root(static_cast<int>(pid), m.path));
    std::shared_ptr<const ElfSymbols> syms = loaded ? *loaded : nullptr;
    files_.emplace(m.path, syms);
    return syms;
}

std::string KernelNames::symbolize_stub(uint32_t pid, uint64_t addr) {
    ProcessState& ps = processes_[pid];
    if (auto it = ps.stub_names.find(addr); it != ps.stub_names.end()) return it->second;

    const Mapping* m = find_mapping(ps.maps, addr);
    if (!m) { // a library mapped since the last snapshot
        if (auto fresh = read_maps(static_cast<int>(pid)); !fresh.empty()) ps.maps = std::move(fresh);
        m = find_mapping(ps.maps, addr);
    }
    std::string name;
    if (m && m->is_file()) {
        if (auto syms = symbols_for(pid, *m)) {
            auto vaddr = syms->offset_to_vaddr(addr - m->start + m->offset);
            const ElfSymbol* sym = vaddr ? syms->covering(*vaddr) : nullptr;
            if (sym) name = demangle(sym->name);
        }
    }
    if (name.empty()) name = fmt::format("kernel@{:#x}", addr);
    ps.stub_names.emplace(addr, name);
    return name;
}

std::string KernelNames::name_of(const ApiCall& call) {
    if (!call.launch) return {};
    if (!call.launch->driver) return symbolize_stub(call.pid, call.launch->function);
    const auto& handles = processes_[call.pid].handle_names;
    if (auto it = handles.find(call.launch->function); it != handles.end()) return it->second;
    return fmt::format("CUfunction@{:#x}", call.launch->function);
}

void KernelNames::on_func_name(const gt_func_name_event& e) {
    auto& handles = processes_[e.pid].handle_names;
    if (e.api == GT_API_CU_KERNEL_GET_FUNCTION) {
        // The CUfunction of a CUkernel keeps the kernel's name.
        if (auto it = handles.find(e.source); it != handles.end()) handles[e.handle] = it->second;
        return;
    }
    std::string mangled(e.name, strnlen(e.name, sizeof e.name));
    handles[e.handle] = demangle(mangled);
}

void KernelNames::forget_process(uint32_t pid) { processes_.erase(pid); }

void KernelNames::set_maps(uint32_t pid, std::vector<Mapping> maps) {
    if (!maps.empty()) processes_[pid].maps = std::move(maps);
}

void KernelNames::inherit(uint32_t child, uint32_t parent) {
    auto it = processes_.find(parent);
    if (it == processes_.end()) return;
    ProcessState& c = processes_[child];
    c.maps = it->second.maps;
    c.handle_names = it->second.handle_names;
}

} // namespace gtrace
