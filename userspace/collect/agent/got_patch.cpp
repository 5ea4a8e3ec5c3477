#include "collect/agent/got_patch.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

namespace gtrace::agent {
namespace {

#if defined(__x86_64__)
constexpr uint32_t kJumpSlot = R_X86_64_JUMP_SLOT, kGlobDat = R_X86_64_GLOB_DAT;
#elif defined(__aarch64__)
constexpr uint32_t kJumpSlot = R_AARCH64_JUMP_SLOT, kGlobDat = R_AARCH64_GLOB_DAT;
#else
#error "got_patch: unsupported architecture"
#endif

// A slot found while the loader's lock is held; written after, with the object pinned.
struct GotSlot {
    void** at;
    size_t redirect; // index into the redirects
};
struct ImportingObject {
    std::string name; // as the loader names it ("" for the program)
    uintptr_t relro_start = 0, relro_end = 0;
    std::vector<GotSlot> slots;
};

struct GotSearch {
    std::vector<GotRedirect>* redirects;
    const std::vector<std::string>* skip;
    uintptr_t own_base;
    std::vector<ImportingObject> importers;
};

// ld.so relocates most of the dynamic section's pointers in place; some loaders leave them as
// offsets from the load address.
uintptr_t dyn_pointer(uintptr_t value, uintptr_t base) { return value < base ? value + base : value; }

// Writes the slot, through RELRO when it lies there. The loader made read-only the RELRO pages
// whole (its end rounded down to a page: the last partial page stays writable, and holds other
// data), so only a slot on one of those is written around an mprotect.
bool write_slot(void** slot, void* value, uintptr_t relro_start, uintptr_t relro_end) {
    const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const auto at = reinterpret_cast<uintptr_t>(slot);
    const uintptr_t protected_start = relro_start & ~(page - 1), protected_end = relro_end & ~(page - 1);
    const bool read_only = at >= protected_start && at + sizeof(void*) <= protected_end;
    void* first = reinterpret_cast<void*>(at & ~(page - 1));
    if (read_only && mprotect(first, page, PROT_READ | PROT_WRITE) != 0) return false;
    __atomic_store_n(slot, value, __ATOMIC_RELEASE); // one aligned word: a concurrent caller sees either
    if (read_only) mprotect(first, page, PROT_READ);
    return true;
}

void patch_object(dl_phdr_info* info, GotSearch& s) {
    const uintptr_t base = info->dlpi_addr;
    const ElfW(Dyn)* dynamic = nullptr;
    uintptr_t relro_start = 0, relro_end = 0;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const auto& ph = info->dlpi_phdr[i];
        if (ph.p_type == PT_DYNAMIC) dynamic = reinterpret_cast<const ElfW(Dyn)*>(base + ph.p_vaddr);
        if (ph.p_type == PT_GNU_RELRO) relro_start = base + ph.p_vaddr, relro_end = relro_start + ph.p_memsz;
    }
    if (!dynamic) return;
    const ElfW(Sym)* symtab = nullptr;
    const char* strtab = nullptr;
    size_t strsz = 0;
    const ElfW(Rela)*tables[2] = {nullptr, nullptr};
    size_t sizes[2] = {0, 0};
    bool rela_plt = true;
    for (const ElfW(Dyn)* d = dynamic; d->d_tag != DT_NULL; ++d) {
        switch (d->d_tag) {
        case DT_SYMTAB: symtab = reinterpret_cast<const ElfW(Sym)*>(dyn_pointer(d->d_un.d_ptr, base)); break;
        case DT_STRTAB: strtab = reinterpret_cast<const char*>(dyn_pointer(d->d_un.d_ptr, base)); break;
        case DT_STRSZ: strsz = d->d_un.d_val; break;
        case DT_JMPREL: tables[0] = reinterpret_cast<const ElfW(Rela)*>(dyn_pointer(d->d_un.d_ptr, base)); break;
        case DT_PLTRELSZ: sizes[0] = d->d_un.d_val; break;
        case DT_PLTREL: rela_plt = d->d_un.d_val == DT_RELA; break;
        case DT_RELA: tables[1] = reinterpret_cast<const ElfW(Rela)*>(dyn_pointer(d->d_un.d_ptr, base)); break;
        case DT_RELASZ: sizes[1] = d->d_un.d_val; break;
        default: break;
        }
    }
    if (!symtab || !strtab || !rela_plt) return; // both architectures use RELA
    ImportingObject found{info->dlpi_name ? info->dlpi_name : "", relro_start, relro_end, {}};
    bool imports = false;
    for (int t = 0; t < 2; ++t) {
        for (size_t i = 0; tables[t] && i < sizes[t] / sizeof(ElfW(Rela)); ++i) {
            const ElfW(Rela)& r = tables[t][i];
            const uint32_t type = ELF64_R_TYPE(r.r_info), sym = ELF64_R_SYM(r.r_info);
            if ((type != kJumpSlot && type != kGlobDat) || sym == 0) continue;
            const uint32_t name_at = symtab[sym].st_name;
            if (name_at >= strsz) continue;
            const char* name = strtab + name_at;
            for (size_t g = 0; g < s.redirects->size(); ++g) {
                if (strcmp(name, (*s.redirects)[g].symbol) != 0) continue;
                imports = true;
                auto** slot = reinterpret_cast<void**>(base + r.r_offset);
                if (__atomic_load_n(slot, __ATOMIC_ACQUIRE) != (*s.redirects)[g].replacement) found.slots.push_back({slot, g});
                break;
            }
        }
    }
    if (imports) s.importers.push_back(std::move(found));
}

int visit(dl_phdr_info* info, size_t, void* data) {
    auto& s = *static_cast<GotSearch*>(data);
    if (info->dlpi_addr == s.own_base) return 0;
    const char* name = info->dlpi_name ? info->dlpi_name : "";
    for (const std::string& skip : *s.skip)
        if (strstr(name, skip.c_str())) return 0;
    patch_object(info, s);
    return 0;
}

} // namespace

GotPatchResult redirect_imports(std::vector<GotRedirect>& redirects, const std::vector<std::string>& skip) {
    Dl_info self{};
    dladdr(reinterpret_cast<void*>(&redirect_imports), &self);
    GotSearch s{&redirects, &skip, reinterpret_cast<uintptr_t>(self.dli_fbase), {}};
    dl_iterate_phdr(visit, &s); // under the loader's lock: nothing else of the loader's is called in it
    GotPatchResult result;
    for (const ImportingObject& imp : s.importers) {
        bool bound = imp.slots.empty(); // all redirected already
        // Pinned while written (it cannot be unloaded meanwhile); its own scope resolves its
        // imports. Not the slot's value: an unresolved lazy slot holds the PLT's stub, whose
        // resolver would write the slot back over the replacement.
        void* handle = dlopen(imp.name.empty() ? nullptr : imp.name.c_str(), RTLD_LAZY | RTLD_NOLOAD);
        if (!handle) continue;
        for (const GotSlot& slot : imp.slots) {
            GotRedirect& g = redirects[slot.redirect];
            void* real = dlsym(handle, g.symbol);
            if (!real) continue;
            if (!*g.real) *g.real = real;
            else if (*g.real != real) continue; // bound to another copy of the library: left alone
            if (write_slot(slot.at, g.replacement, imp.relro_start, imp.relro_end)) ++result.slots, bound = true;
        }
        dlclose(handle);
        if (bound) result.bound.push_back(imp.name.empty() ? "(the program)" : imp.name);
    }
    return result;
}

} // namespace gtrace::agent
