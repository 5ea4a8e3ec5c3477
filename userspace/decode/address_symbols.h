// Names code addresses in traced processes through the ELF symbols of the object mapped there
// (demangled): kernel host stubs and sampled native stacks. Keeps each process's latest maps,
// read while it was alive, since a short-lived process may be gone when its events are decoded.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "foundation/elf_symbols.h"
#include "discover/proc_maps.h"

namespace gtrace {

class AddressSymbols {
public:
    // "function" when a symbol covers addr, else "file+0xoffset", else "" (unmapped).
    std::string name_at(uint32_t pid, uint64_t addr);
    void set_maps(uint32_t pid, std::vector<Mapping> maps);
    void inherit(uint32_t child, uint32_t parent); // a forked child starts with its parent's maps
    void forget_process(uint32_t pid);

private:
    std::shared_ptr<const ElfSymbols> symbols_for(uint32_t pid, const Mapping& m);
    struct ProcessState {
        std::vector<Mapping> maps;
        std::unordered_map<uint64_t, std::string> names; // address -> name
    };
    std::unordered_map<uint32_t, ProcessState> processes_;
    std::map<std::string, std::shared_ptr<const ElfSymbols>> files_; // by path
};

} // namespace gtrace
