#include "decode/kernel_names.h"

#include <cstring>

#include <fmt/format.h>

#include "foundation/elf_symbols.h"

namespace gtrace {

std::string KernelNames::name_of(const ApiCall& call) {
    if (!call.launch) return {};
    if (!call.launch->driver) {
        std::string name = addresses_.name_at(call.pid, call.launch->function);
        return name.empty() ? fmt::format("kernel@{:#x}", call.launch->function) : name;
    }
    const auto& handles = handles_[call.pid];
    if (auto it = handles.find(call.launch->function); it != handles.end()) return it->second;
    return fmt::format("CUfunction@{:#x}", call.launch->function);
}

void KernelNames::on_func_name(const gt_func_name_event& e) {
    auto& handles = handles_[e.pid];
    if (e.api == GT_API_CU_KERNEL_GET_FUNCTION) {
        // The CUfunction of a CUkernel keeps the kernel's name.
        if (auto it = handles.find(e.source); it != handles.end()) handles[e.handle] = it->second;
        return;
    }
    handles[e.handle] = demangle(std::string(e.name, strnlen(e.name, sizeof e.name)));
}

void KernelNames::inherit(uint32_t child, uint32_t parent) {
    if (auto it = handles_.find(parent); it != handles_.end()) handles_[child] = it->second;
}

void KernelNames::forget_process(uint32_t pid) { handles_.erase(pid); }

} // namespace gtrace
