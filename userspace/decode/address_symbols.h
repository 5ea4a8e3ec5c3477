// Names code addresses in traced processes through the ELF symbols of the object mapped there
// (demangled): kernel host stubs and sampled native stacks. Keeps each process's latest maps,
// read while it was alive, since a short-lived process may be gone when its events are decoded.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "foundation/elf_address_table.h"
#include "discover/proc_maps.h"
#include "discover/target_files.h"
#include "foundation/process_observer.h"

namespace gtrace {

class AddressSymbols final : public ProcessObserver {
public:
    // Tables held at most (least recently used let go), at 16 bytes a symbol: pip torch 2.x's
    // libtorch_cpu (390,000 functions, 6 MiB), libtorch_cuda (3.5 MiB), libtorch_python, libpython
    // and the rest a job samples in, with room to spare: a table that does not fit is loaded
    // again sample after sample (at 8 MiB with names held, gtrace spent most of its CPU there).
    // Native sample stacks walked by frame pointers through code built without them reach into
    // every library a process maps, a few more each minute (bench/README.md, the soak).
    static constexpr size_t kDefaultMaxBytes = 32u << 20;
    // Objects are opened as each process maps them (`files`: discover/target_files.h).
    explicit AddressSymbols(TargetFiles& files, size_t max_bytes = kDefaultMaxBytes) : target_files_(files), max_bytes_(max_bytes) {}

    // "function" when a symbol covers addr, else "file+0xoffset", else "" (unmapped).
    std::string name_at(uint32_t pid, uint64_t addr);
    void set_maps(uint32_t pid, std::vector<Mapping> maps);
    void inherit(uint32_t child, uint32_t parent); // a forked child starts with its parent's maps
    void forget_process(uint32_t pid);
    void process_forked(uint32_t pid, uint32_t parent) override { inherit(pid, parent); }
    void process_exec(uint32_t pid) override { forget_process(pid); }
    void process_exited(uint32_t pid) override { forget_process(pid); }

private:
    struct ProcessState {
        std::vector<Mapping> maps;
        std::unordered_map<uint64_t, std::string> names; // address -> name
    };
    std::unordered_map<uint32_t, ProcessState> processes_;
    // Symbol tables by file (device, inode: one path may name another file in each container),
    // least recently used let go past a budget: over an hour, samples land in more and more of
    // a torch process's few hundred libraries.
    struct File {
        std::shared_ptr<const ElfAddressTable> table; // null: not an ELF file we could read
        std::shared_ptr<InputFile> open; // where names are read; closed past kMaxOpenFiles
        uint64_t last_use = 0;
        size_t bytes = 0;
    };
    using FileKey = std::pair<uint64_t, uint64_t>;
    TargetFiles& target_files_;
    std::map<FileKey, File> files_;
    size_t max_bytes_;
    size_t bytes_held_ = 0;
    uint64_t uses_ = 0;
    File* file_for(uint32_t pid, const Mapping& m);
    std::string function_at(uint32_t pid, const Mapping& m, uint64_t offset);
    void trim_files(const FileKey& keep);
    void close_idle_files(const FileKey& keep);
};

} // namespace gtrace
