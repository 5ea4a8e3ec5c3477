// Names kernels: a runtime launch's host stub address through the ELF symbols of the object
// mapped at that address (demangled); a driver launch's CUfunction through the names seen at
// cuModuleGetFunction / cuLibraryGetKernel / cuKernelGetFunction.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "decode/api_call.h"
#include "decode/elf_symbols.h"
#include "discover/proc_maps.h"

namespace gtrace {

class KernelNames {
public:
    std::string name_of(const ApiCall& call);
    void on_func_name(const gt_func_name_event& e);
    // The latest mappings of a process, read while it was alive: a short-lived process may be
    // gone by the time its launches are decoded.
    void set_maps(uint32_t pid, std::vector<Mapping> maps);
    // A forked child starts with its parent's mappings and function handles.
    void inherit(uint32_t child, uint32_t parent);
    // The process exec'ed or exited: its mappings and handles no longer hold.
    void forget_process(uint32_t pid);

private:
    std::string symbolize_stub(uint32_t pid, uint64_t addr);
    std::shared_ptr<const ElfSymbols> symbols_for(uint32_t pid, const Mapping& m);

    struct ProcessState {
        std::vector<Mapping> maps;
        std::unordered_map<uint64_t, std::string> stub_names;   // stub address -> name
        std::unordered_map<uint64_t, std::string> handle_names; // CUfunction/CUkernel -> name
    };
    std::unordered_map<uint32_t, ProcessState> processes_;
    std::map<std::string, std::shared_ptr<const ElfSymbols>> files_; // by path
};

} // namespace gtrace
