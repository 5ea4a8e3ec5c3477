#include "discover/python_runtime.h"
#include "foundation/test_hooks.h"

#include <pthread.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <unordered_set>

#include "foundation/elf_symbols.h"
#include "discover/process_memory.h"
#include "foundation/numbers.h"

namespace gtrace {
namespace {

struct VersionLayout {
    int minor;
    uint32_t tss_key;           // offset of autoTSSkey's key in _PyRuntime (Py_tss_t + 4)
    gt_py_layout frames;        // without the per-process fields
    PyCodeLayout code;
};

// x86-64 offsets (public headers of each version, checked against the pyenv builds).
constexpr uint16_t NO = GT_PY_NO_OFFSET;
const VersionLayout kLayouts[] = {
    // minor, tss key, {key addr, specific, tstate_frame, cframe_frame, previous, code, instr, owner, ptr?, c-owner, tag,
    //                 stacked, read start, read len, epoch: set per process}
    {9, 584 + 4, {0, 0, 24, NO, 24, 32, 104, NO, 0, 0, 0, 0, 0, 0, 0}, {104, 112, 0, 40, 120, 0, 48}},
    {10, 584 + 4, {0, 0, 24, NO, 24, 32, 96, NO, 0, 0, 0, 0, 0, 0, 0}, {104, 112, 0, 40, 120, 0, 48}},
    {11, 592 + 4, {0, 0, 56, 8, 48, 32, 56, NO, 1, 0, 0, 0, 0, 0, 0}, {112, 120, 128, 72, 136, 184, 48}},
    {12, 1544 + 4, {0, 0, 56, 0, 8, 0, 56, 70, 1, 3, 0, 0, 0, 0, 0}, {112, 120, 128, 68, 136, 192, 40}},
    {13, 2160 + 4, {0, 0, 72, NO, 8, 0, 56, 70, 1, 3, 0, 0, 0, 0, 0}, {112, 120, 128, 68, 136, 200, 40}},
};

// Load address of the file's first mapping (ELF vaddr 0 maps there for PIE and libraries).
std::optional<uint64_t> load_bias(const std::vector<Mapping>& maps, const std::string& path, const ElfSymbols& syms) {
    for (const auto& m : maps) {
        if (m.path != path) continue;
        auto vaddr = syms.offset_to_vaddr(m.offset);
        if (vaddr) return m.start - *vaddr;
    }
    return std::nullopt;
}

} // namespace

std::optional<std::pair<int, int>> python_file_version(std::string_view path) {
    std::string_view name = path.substr(path.rfind('/') + 1); // npos + 1 == 0: the whole path
    if (name.starts_with("lib")) name.remove_prefix(3);
    if (!name.starts_with("python")) return std::nullopt;
    name.remove_prefix(6);
    size_t dot = name.find('.');
    if (dot == std::string_view::npos) return std::nullopt;
    size_t end = dot + 1;
    while (end < name.size() && name[end] >= '0' && name[end] <= '9') ++end;
    auto major = parse_decimal<int>(name.substr(0, dot)), minor = parse_decimal<int>(name.substr(dot + 1, end - dot - 1));
    if (!major || !minor) return std::nullopt; // not digits, or a number no CPython has (libpython3.99999999999.so)
    return std::make_pair(*major, *minor);
}

std::optional<uint16_t> glibc_pthread_specific_offset() {
    static const std::optional<uint16_t> offset = []() -> std::optional<uint16_t> {
        pthread_key_t key;
        if (pthread_key_create(&key, nullptr) != 0) return std::nullopt;
        const uint64_t magic = 0x6774726163655f6bull; // "gtrace_k"
        pthread_setspecific(key, reinterpret_cast<void*>(magic));
        std::optional<uint16_t> found;
        std::vector<uint64_t> self(512);
        // Read through process_vm_readv: a fault past the end of struct pthread is an error, not a crash.
        if (key < 32 && read_process_memory(getpid(), static_cast<uint64_t>(pthread_self()), self.data(), self.size() * 8)) {
            for (size_t i = 0; i < self.size(); ++i)
                if (self[i] == magic) {
                    size_t off = i * 8 - key * 16 - 8;
                    found = static_cast<uint16_t>(off);
                    break;
                }
        }
        pthread_setspecific(key, nullptr);
        pthread_key_delete(key);
        return found;
    }();
    return offset;
}

PythonDetection detect_python(int pid, const std::vector<Mapping>& maps, TargetFiles& files) {
    static const std::unordered_set<std::string_view> wanted{"_PyRuntime", "Py_Version", "PyCode_Type"};
    PythonDetection out;
    // Files named like an interpreter (python3.11, libpython3.12.so.1.0), opened as the process maps them.
    for (const OpenedMapping& opened : files.open_mapped(pid, maps, [](const Mapping& m) { return python_file_version(m.path).has_value(); })) {
        const Mapping& m = opened.mapping;
        auto named = python_file_version(m.path);
        auto syms = ElfSymbols::load(opened.file.fd_path(), &wanted);
        if (!syms) continue;
        const ElfSymbol* runtime = (*syms)->find("_PyRuntime");
        if (!runtime) continue; // the python3 launcher of a shared build: the interpreter is in libpython
        auto bias = load_bias(maps, m.path, **syms);
        if (!bias) continue;
        auto [major, minor] = *named;
        if (const ElfSymbol* v = (*syms)->find("Py_Version")) { // 3.11+: the exact version
            uint32_t hex = 0;
            if (read_process_memory(pid, *bias + v->vaddr, &hex, sizeof hex)) {
                major = static_cast<int>(hex >> 24);
                minor = static_cast<int>((hex >> 16) & 0xff);
            }
        }
        const VersionLayout* layout = nullptr;
        for (const auto& l : kLayouts)
            if (major == 3 && l.minor == minor) layout = &l;
        auto pthread_specific = glibc_pthread_specific_offset();
        if (!layout || !pthread_specific) {
            out.unsupported = layout ? "glibc's thread-specific data could not be located"
                                     : "CPython " + std::to_string(major) + "." + std::to_string(minor) +
                                           " is not supported (3.9 to 3.13 are)";
            return out;
        }
        PythonRuntime rt;
        rt.major = major;
        rt.minor = minor;
        rt.object = m.path;
        rt.runtime_addr = *bias + runtime->vaddr;
        if (const ElfSymbol* ct = (*syms)->find("PyCode_Type")) rt.code_type_addr = *bias + ct->vaddr;
        if (minor >= 13) { // _PyRuntime starts with _Py_DebugOffsets: check before trusting the table
            char cookie[8];
            uint64_t version = 0;
            if (!read_process_memory(pid, rt.runtime_addr, cookie, 8) || memcmp(cookie, "xdebugpy", 8) != 0 ||
                !read_process_memory(pid, rt.runtime_addr + 8, &version, 8) || ((version >> 16) & 0xffff) != (0x0300u | minor)) {
                out.unsupported = "CPython " + rt.version() + "'s debug offsets do not match";
                return out;
            }
        }
        rt.layout = layout->frames;
        // The lowest field offset starts the per-frame read; every field must fit in it.
        uint16_t lo = std::min({rt.layout.frame_previous, rt.layout.frame_code, rt.layout.frame_instr});
        uint16_t hi = std::max<uint16_t>({static_cast<uint16_t>(rt.layout.frame_previous + 8),
                                          static_cast<uint16_t>(rt.layout.frame_code + 8),
                                          static_cast<uint16_t>(rt.layout.frame_instr + 8),
                                          static_cast<uint16_t>(rt.layout.frame_owner == GT_PY_NO_OFFSET ? 0 : rt.layout.frame_owner + 1)});
        if (hi - lo > GT_PY_FRAME_READ) {
            out.unsupported = "CPython " + rt.version() + "'s frame fields are too far apart";
            return out;
        }
        // _PyInterpreterFrame in the thread's data stack; the benchmark compares with frame-by-frame reads.
        rt.layout.frames_stacked = minor >= 11 && !GTRACE_TEST_HOOK("PY_FRAME_BY_FRAME");
        rt.layout.frame_read_start = lo;
        rt.layout.frame_read_len = static_cast<uint16_t>(hi - lo);
        rt.layout.tss_key_addr = rt.runtime_addr + layout->tss_key;
        rt.layout.pthread_specific = *pthread_specific;
        rt.code = layout->code;
        out.runtime = rt;
        return out;
    }
    return out;
}

} // namespace gtrace
