#include "decode/python_frames.h"

#include <sys/uio.h>

#include <algorithm>
#include <climits>
#include <cstdint>

#include <fmt/format.h>

#include "discover/process_memory.h"

namespace gtrace {
namespace {

constexpr size_t kMaxString = 4096;

// A compact ASCII str object's text (names and paths are ASCII in practice).
bool read_str(uint32_t pid, uint64_t obj, uint16_t data_offset, std::string& out) {
    int64_t length = 0;
    uint32_t state = 0;
    if (!obj || !read_process_value(static_cast<pid_t>(pid), obj + 16, length) || !read_process_value(static_cast<pid_t>(pid), obj + 32, state)) return false;
    bool compact = state & (1u << 5), ascii = state & (1u << 6);
    if (!compact || !ascii || length < 0 || static_cast<size_t>(length) > kMaxString) return false;
    out.resize(static_cast<size_t>(length));
    return length == 0 || read_process_memory(static_cast<pid_t>(pid), obj + data_offset, out.data(), out.size());
}

// A bytes object's contents (ob_size at 16, data at 32).
bool read_bytes(uint32_t pid, uint64_t obj, std::string& out) {
    int64_t size = 0;
    if (!obj || !read_process_value(static_cast<pid_t>(pid), obj + 16, size) || size < 0 || size > (1 << 20)) return false;
    out.resize(static_cast<size_t>(size));
    return size == 0 || read_process_memory(static_cast<pid_t>(pid), obj + 32, out.data(), out.size());
}

// The table is the traced process's memory: a varint may run on for any number of bytes, and
// its deltas may add up past any int. Bits past 32 are dropped, sums are kept in 64 bits, and a
// line is clamped to what a line number can be.
uint32_t read_varint(const std::string& t, size_t& i) {
    uint64_t value = 0;
    unsigned shift = 0;
    while (i < t.size()) {
        auto b = static_cast<unsigned char>(t[i++]);
        if (shift < 32) value |= static_cast<uint64_t>(b & 63u) << shift;
        shift += 6;
        if (!(b & 64)) break;
    }
    return static_cast<uint32_t>(std::min<uint64_t>(value, UINT32_MAX));
}

int64_t read_signed_varint(const std::string& t, size_t& i) {
    uint32_t v = read_varint(t, i);
    return (v & 1) ? -static_cast<int64_t>(v >> 1) : static_cast<int64_t>(v >> 1);
}

int clamp_line(int64_t line) { return static_cast<int>(std::clamp<int64_t>(line, 0, INT32_MAX)); }

} // namespace

std::string PyFrame::text() const {
    return filename.empty() ? qualname : fmt::format("{} ({}:{})", qualname, filename, line);
}

int line_from_lnotab(const std::string& t, int firstlineno, uint64_t offset) {
    int64_t line = firstlineno;
    uint64_t addr = 0;
    for (size_t i = 0; i + 1 < t.size(); i += 2) {
        addr += static_cast<unsigned char>(t[i]);
        if (addr > offset) break;
        line += static_cast<signed char>(t[i + 1]);
    }
    return clamp_line(line);
}

int line_from_linetable(const std::string& t, int firstlineno, uint64_t offset) {
    int64_t line = firstlineno;
    uint64_t addr = 0;
    for (size_t i = 0; i + 1 < t.size(); i += 2) {
        auto sdelta = static_cast<unsigned char>(t[i]);
        auto ldelta = static_cast<signed char>(t[i + 1]);
        if (ldelta != -128) line += ldelta;
        uint64_t end = addr + sdelta;
        if (offset >= addr && offset < end) return ldelta == -128 ? 0 : clamp_line(line);
        addr = end;
    }
    return clamp_line(line);
}

int line_from_locations(const std::string& t, int firstlineno, uint64_t offset) {
    const uint64_t index = offset / 2; // code units
    int64_t line = firstlineno;
    uint64_t unit = 0;
    size_t i = 0;
    while (i < t.size()) {
        auto first = static_cast<unsigned char>(t[i++]);
        if (!(first & 0x80)) continue; // not at an entry start: resynchronize
        unsigned code = (first >> 3) & 15;
        uint64_t length = (first & 7) + 1;
        bool has_line = true;
        if (code == 15) {
            has_line = false;
        } else if (code == 14) {
            line += read_signed_varint(t, i);
            read_varint(t, i), read_varint(t, i), read_varint(t, i);
        } else if (code == 13) {
            line += read_signed_varint(t, i);
        } else if (code >= 10) {
            line += static_cast<int>(code) - 10;
            i += 2;
        } else {
            i += 1;
        }
        if (index >= unit && index < unit + length) return has_line ? clamp_line(line) : 0;
        unit += length;
    }
    return clamp_line(line);
}

void PythonFrames::set_runtime(uint32_t pid, const PythonRuntime& rt) {
    std::lock_guard lock(mutex_);
    processes_[pid] = Process{rt, {}};
}

void PythonFrames::forget_process(uint32_t pid) {
    std::lock_guard lock(mutex_);
    processes_.erase(pid);
}

bool PythonFrames::has_runtime(uint32_t pid) const {
    std::lock_guard lock(mutex_);
    return processes_.contains(pid);
}

uint64_t PythonFrames::torn_stacks() const {
    std::lock_guard lock(mutex_);
    return torn_;
}

void PythonFrames::revalidate(uint32_t pid, Process& p, const gt_py_stack_event& e) {
    // A freed code object's memory may hold another one now: its type and first line must still
    // match the cached ones. One process_vm_readv checks every cached frame of the stack.
    std::vector<uint64_t> addrs;
    for (unsigned i = 0; i < e.nframes && i < GT_PY_MAX_FRAMES; ++i)
        if (p.codes.contains(e.frames[i].code)) addrs.push_back(e.frames[i].code);
    if (addrs.empty()) return;
    std::vector<uint64_t> types(addrs.size());
    std::vector<int32_t> firsts(addrs.size());
    std::vector<iovec> local, remote;
    for (size_t i = 0; i < addrs.size(); ++i) {
        local.push_back({&types[i], 8});
        remote.push_back({reinterpret_cast<void*>(addrs[i] + 8), 8});
        local.push_back({&firsts[i], 4});
        remote.push_back({reinterpret_cast<void*>(addrs[i] + p.rt.code.firstlineno), 4});
    }
    ssize_t want = static_cast<ssize_t>(addrs.size() * 12);
    bool complete = process_vm_readv(static_cast<pid_t>(pid), local.data(), local.size(), remote.data(), remote.size(), 0) == want;
    for (size_t i = 0; i < addrs.size(); ++i) {
        auto it = p.codes.find(addrs[i]);
        if (it != p.codes.end() && (!complete || types[i] != it->second.code_type || firsts[i] != it->second.firstlineno))
            p.codes.erase(it); // read it afresh, or fail as torn
    }
}

const PythonFrames::Code* PythonFrames::code_at(Process& p, uint32_t pid, uint64_t addr) {
    if (auto it = p.codes.find(addr); it != p.codes.end()) return &it->second; // revalidated per stack
    const PyCodeLayout& l = p.rt.code;
    Code c;
    uint64_t filename = 0, name = 0, table = 0;
    if (!read_process_value(static_cast<pid_t>(pid), addr + 8, c.code_type) || (p.rt.code_type_addr && c.code_type != p.rt.code_type_addr) ||
        !read_process_value(static_cast<pid_t>(pid), addr + l.filename, filename) || !read_process_value(static_cast<pid_t>(pid), addr + (l.qualname ? l.qualname : l.name), name) ||
        !read_process_value(static_cast<pid_t>(pid), addr + l.firstlineno, c.firstlineno) || !read_process_value(static_cast<pid_t>(pid), addr + l.linetable, table) ||
        !read_str(pid, filename, l.ascii_data, c.filename) || !read_str(pid, name, l.ascii_data, c.qualname) ||
        !read_bytes(pid, table, c.table))
        return nullptr;
    return &p.codes.emplace(addr, std::move(c)).first->second;
}

std::vector<PyFrame> PythonFrames::symbolize(const gt_py_stack_event& e) {
    std::lock_guard lock(mutex_);
    auto it = processes_.find(e.pid);
    if (it == processes_.end()) return {};
    Process& p = it->second;
    revalidate(e.pid, p, e);
    std::vector<PyFrame> out;
    for (unsigned i = 0; i < e.nframes && i < GT_PY_MAX_FRAMES; ++i) {
        const gt_py_frame& f = e.frames[i];
        const Code* c = code_at(p, e.pid, f.code);
        if (!c) { // torn: the stack changed under the reader, or not a code object
            ++torn_;
            return {};
        }
        uint64_t offset = 0;
        int minor = p.rt.minor;
        if (minor >= 11) offset = f.instr >= f.code + p.rt.code.code_adaptive ? f.instr - f.code - p.rt.code.code_adaptive : 0;
        else if (minor == 10) offset = f.instr * 2; // f_lasti counts code units
        else offset = f.instr;                      // 3.9: f_lasti is a byte offset
        int line = minor >= 11 ? line_from_locations(c->table, c->firstlineno, offset)
                   : minor == 10 ? line_from_linetable(c->table, c->firstlineno, offset)
                                 : line_from_lnotab(c->table, c->firstlineno, offset);
        out.push_back({c->qualname, c->filename, line});
    }
    return out;
}

const PyFrame* source_frame(const std::vector<PyFrame>& stack) {
    for (const auto& f : stack) {
        const std::string& file = f.filename;
        bool library = file.find("/torch/") != std::string::npos || file.find("/ctypes/") != std::string::npos ||
                       file.find("/nvidia/") != std::string::npos || file.find("/triton/") != std::string::npos ||
                       file.starts_with("<");
        if (!library) return &f;
    }
    return stack.empty() ? nullptr : &stack.front();
}

} // namespace gtrace
