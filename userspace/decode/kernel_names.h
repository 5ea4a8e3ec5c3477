// Names kernels: a runtime launch's host stub address through the ELF symbols of the object
// mapped there (demangled); a driver launch's CUfunction through the names seen at
// cuModuleGetFunction / cuLibraryGetKernel / cuKernelGetFunction.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>

#include "decode/address_symbols.h"
#include "decode/api_call.h"
#include "foundation/process_observer.h"

namespace gtrace {

class KernelNames final : public ProcessObserver {
public:
    explicit KernelNames(AddressSymbols& addresses) : addresses_(addresses) {}
    std::string name_of(const ApiCall& call);
    void on_func_name(const gt_func_name_event& e);
    void inherit(uint32_t child, uint32_t parent); // a forked child keeps its parent's handles
    void forget_process(uint32_t pid);             // exec or exit: its handles no longer hold
    void process_forked(uint32_t pid, uint32_t parent) override { inherit(pid, parent); }
    void process_exec(uint32_t pid) override { forget_process(pid); }
    void process_exited(uint32_t pid) override { forget_process(pid); }

private:
    AddressSymbols& addresses_;
    std::unordered_map<uint32_t, std::unordered_map<uint64_t, std::string>> handles_; // pid -> handle -> name
};

} // namespace gtrace
