#include "foundation/elf_address_table.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "foundation/bounded_call.h"

namespace gtrace {
using namespace elf_reading;
namespace {

// C++ names run long (torch's templates: a few KiB); past this one is cut.
constexpr uint64_t kMaxNameBytes = 64 * 1024;

// The NUL-terminated string at [at, end) of the file, read a chunk at a time.
std::optional<std::string> read_string(int fd, uint64_t at, uint64_t end) {
    std::string name;
    char chunk[256];
    while (at < end && name.size() < kMaxNameBytes) {
        size_t want = static_cast<size_t>(std::min<uint64_t>(sizeof chunk, end - at));
        ssize_t got = pread(fd, chunk, want, static_cast<off_t>(at));
        if (got <= 0) return std::nullopt;
        auto* nul = static_cast<const char*>(memchr(chunk, 0, static_cast<size_t>(got)));
        name.append(chunk, nul ? static_cast<size_t>(nul - chunk) : static_cast<size_t>(got));
        if (nul) return name;
        at += static_cast<uint64_t>(got);
    }
    return name.empty() ? std::nullopt : std::optional(name);
}

Result<std::shared_ptr<InputFile>> duplicate(const InputFile& file, const std::string& shown) {
    auto copy = InputFile::adopt(dup(file.fd()), shown);
    if (!copy) return copy.error();
    return std::make_shared<InputFile>(std::move(*copy));
}

} // namespace

Result<std::shared_ptr<const ElfAddressTable>> ElfAddressTable::load(const InputFile& file, const std::string& shown) {
    if (elf_version(EV_CURRENT) == EV_NONE) return make_error(ExitCode::Internal, "libelf is unusable");
    bool remote = on_remote_file_system(file.fd());
    dev_t dev = file.stat().st_dev;
    if (remote && unanswering_device(dev)) return make_error(ExitCode::Internal, shown + ": its file system did not answer before");
    auto own = duplicate(file, shown);
    if (!own) return own.error();
    auto parse = [handle_file = *own, shown, remote]() -> Result<std::shared_ptr<const ElfAddressTable>> {
        ElfHandle h;
        if (!(h.elf = elf_begin(handle_file->fd(), ELF_C_READ, nullptr)) || elf_kind(h.elf) != ELF_K_ELF)
            return make_error(ExitCode::Internal, shown + " is not an ELF file");
        auto table = std::make_shared<ElfAddressTable>();
        table->remote_ = remote;
        table->segments_ = load_segments(h.elf);
        auto& strings = table->strings_;
        for_each_symbol(h.elf, handle_file->size(), false, [&](const GElf_Sym& sym, size_t, const GElf_Shdr& sh) {
            uint64_t name = sh.sh_offset + sym.st_name;
            if (sym.st_name >= sh.sh_size || name > std::numeric_limits<uint32_t>::max()) return;
            if (std::none_of(strings.begin(), strings.end(), [&](const Strings& t) { return t.begin == sh.sh_offset; }))
                strings.push_back({sh.sh_offset, sh.sh_offset + sh.sh_size});
            auto size = static_cast<uint32_t>(std::min<uint64_t>(sym.st_size, std::numeric_limits<uint32_t>::max()));
            table->entries_.push_back({sym.st_value, size, static_cast<uint32_t>(name)});
        });
        // .symtab and .dynsym repeat each other, and aliases share an address: one name per
        // address, the one with the longest extent.
        auto& e = table->entries_;
        std::sort(e.begin(), e.end(), [](const Entry& a, const Entry& b) { return a.vaddr != b.vaddr ? a.vaddr < b.vaddr : a.size > b.size; });
        e.erase(std::unique(e.begin(), e.end(), [](const Entry& a, const Entry& b) { return a.vaddr == b.vaddr; }), e.end());
        e.shrink_to_fit();
        return std::shared_ptr<const ElfAddressTable>(std::move(table));
    };
    if (!remote) return parse();
    // A FUSE or network file system may never answer (its server stopped, or was made to).
    auto parsed = bounded_call<Result<std::shared_ptr<const ElfAddressTable>>>(parse);
    if (!parsed) {
        mark_unanswering(dev);
        return make_error(ExitCode::Internal, shown + ": its file system does not answer");
    }
    return std::move(*parsed);
}

std::optional<uint64_t> ElfAddressTable::offset_to_vaddr(uint64_t offset) const { return elf_reading::offset_to_vaddr(segments_, offset); }

std::optional<std::string> ElfAddressTable::name_covering(uint64_t vaddr, const InputFile& file) const {
    auto it = std::upper_bound(entries_.begin(), entries_.end(), vaddr, [](uint64_t v, const Entry& e) { return v < e.vaddr; });
    // Walk back over symbols that start at or before vaddr; the first that covers it wins.
    for (int steps = 0; it != entries_.begin() && steps < 8; ++steps) {
        --it;
        if (vaddr == it->vaddr || vaddr - it->vaddr < it->size) return read_name(*it, file);
    }
    return std::nullopt;
}

std::optional<std::string> ElfAddressTable::read_name(const Entry& e, const InputFile& file) const {
    auto strings = std::find_if(strings_.begin(), strings_.end(), [&](const Strings& s) { return e.name >= s.begin && e.name < s.end; });
    if (strings == strings_.end()) return std::nullopt;
    uint64_t at = e.name, end = strings->end;
    if (!remote_) return read_string(file.fd(), at, end);
    if (unanswering_device(file.stat().st_dev)) return std::nullopt;
    auto own = duplicate(file, "");
    if (!own) return std::nullopt;
    auto name = bounded_call<std::optional<std::string>>([own = *own, at, end] { return read_string(own->fd(), at, end); });
    if (!name) mark_unanswering(file.stat().st_dev);
    return name ? *name : std::nullopt;
}

size_t ElfAddressTable::memory_bytes() const {
    return entries_.capacity() * sizeof(Entry) + strings_.capacity() * sizeof(Strings) + segments_.capacity() * sizeof(LoadSegment) +
           sizeof(*this);
}

} // namespace gtrace
