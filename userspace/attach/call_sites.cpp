#include "attach/call_sites.h"

#include <capstone/capstone.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "foundation/elf_symbols.h"

namespace gtrace {
namespace {

struct Section {
    std::string name;
    uint64_t addr = 0, offset = 0, size = 0;
    bool exec = false;
    bool in_file = false;           // not NOBITS, and inside the file
    const uint8_t* bytes = nullptr; // the file's bytes, when read (ElfImage::open's `whole`)
};

class ElfImage {
public:
    ~ElfImage() {
        if (elf_) elf_end(elf_);
        if (fd_ >= 0) close(fd_);
    }
    // `whole`: the PLT sections and the relocations read at once (what finding call sites needs
    // besides the code); else the section headers and .eh_frame_hdr (the functions' starts) only. Code is read a chunk or a
    // function at a time (for_each_code_chunk, function_code): pip torch's libtorch_cpu holds
    // 286 MB of it, which a whole read once held in gtrace's memory on the job's host.
    Result<void> open(const std::string& path, bool whole = true) {
        if (elf_version(EV_CURRENT) == EV_NONE) return make_error(ExitCode::Internal, "libelf is unusable");
        fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        struct stat st {};
        if (fd_ < 0 || fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) return make_error(ExitCode::Internal, path + ": not a regular file");
        size_ = static_cast<uint64_t>(st.st_size);
        // Read, not mapped: a file truncated under gtrace must not fault it (SIGBUS).
        elf_ = elf_begin(fd_, ELF_C_READ, nullptr);
        GElf_Ehdr eh;
        if (!elf_ || elf_kind(elf_) != ELF_K_ELF || !gelf_getehdr(elf_, &eh) || eh.e_machine != EM_X86_64)
            return make_error(ExitCode::Internal, path + ": not an x86-64 ELF file");
        size_t shstrndx = 0;
        elf_getshdrstrndx(elf_, &shstrndx);
        for (Elf_Scn* scn = nullptr; (scn = elf_nextscn(elf_, scn));) {
            GElf_Shdr sh;
            if (!gelf_getshdr(scn, &sh)) continue;
            Section s;
            const char* name = elf_strptr(elf_, shstrndx, sh.sh_name);
            s.name = name ? name : "";
            s.addr = sh.sh_addr, s.offset = sh.sh_offset, s.size = sh.sh_size;
            s.exec = (sh.sh_flags & SHF_EXECINSTR) != 0;
            // Only what lies inside the file is read: a section header's size is the file's word.
            bool inside = sh.sh_type != SHT_NOBITS && sh.sh_offset <= size_ && sh.sh_size <= size_ - sh.sh_offset;
            s.in_file = inside;
            if (inside && ((whole && s.exec && s.name.starts_with(".plt")) || s.name == ".eh_frame_hdr")) s.bytes = read_section(sh);
            if (inside && whole && sh.sh_type == SHT_RELA) relocations(scn, sh);
            sections_.push_back(std::move(s));
        }
        return {};
    }
    const std::vector<Section>& sections() const { return sections_; }
    const Section* named(std::string_view name) const {
        for (const auto& s : sections_)
            if (s.name == name) return &s;
        return nullptr;
    }
    // GOT slot → the dynamic symbol a PLT stub jumping through it calls.
    const std::unordered_map<uint64_t, std::string>& got_slots() const { return got_slots_; }

    // Calls `visit(bytes, length, vaddr)` for each code section's bytes, a chunk at a time; a
    // chunk repeats the last `overlap` bytes of the one before (a pattern may straddle two).
    template <typename Visit>
    void for_each_code_chunk(size_t overlap, Visit&& visit) const {
        constexpr size_t kChunk = 4u << 20;
        std::vector<uint8_t> buf(kChunk + overlap);
        for (const auto& s : sections_) {
            if (!s.exec || !s.in_file || s.name.starts_with(".plt")) continue;
            size_t kept = 0;
            for (uint64_t at = 0; at < s.size;) {
                size_t want = static_cast<size_t>(std::min<uint64_t>(kChunk, s.size - at));
                ssize_t n = pread(fd_, buf.data() + kept, want, static_cast<off_t>(s.offset + at));
                if (n < 0 && errno == EINTR) continue;
                if (n <= 0) break;
                size_t have = kept + static_cast<size_t>(n);
                visit(buf.data(), have, s.addr + at - kept);
                kept = std::min(have, overlap);
                std::memmove(buf.data(), buf.data() + have - kept, kept);
                at += static_cast<uint64_t>(n);
            }
        }
    }

    // The code of [vaddr, vaddr + size) in the code section holding vaddr, cut at the section's
    // end, read now (its file offset: `offset`). Empty when no code section of the file holds it.
    std::vector<uint8_t> function_code(uint64_t vaddr, uint64_t size, uint64_t& offset) const {
        for (const auto& s : sections_) {
            if (!s.exec || !s.in_file || vaddr < s.addr || vaddr >= s.addr + s.size) continue;
            std::vector<uint8_t> code(static_cast<size_t>(std::min(size, s.addr + s.size - vaddr)));
            offset = s.offset + (vaddr - s.addr);
            for (size_t done = 0; done < code.size();) {
                ssize_t n = pread(fd_, code.data() + done, code.size() - done, static_cast<off_t>(offset + done));
                if (n < 0 && errno == EINTR) continue;
                if (n <= 0) return {};
                done += static_cast<size_t>(n);
            }
            return code;
        }
        return {};
    }

private:
    // Code is read, not mapped: the kernel puts the breakpoints of every uprobe on this file (ours,
    // another gtrace's, bpftrace's) into any mapping of it that may execute — a read-only mmap of
    // the file included — and an int3 at a function's entry or ret hides the real instruction.
    const uint8_t* read_section(const GElf_Shdr& sh) {
        std::vector<uint8_t> bytes(sh.sh_size);
        for (size_t done = 0; done < bytes.size();) {
            ssize_t n = pread(fd_, bytes.data() + done, bytes.size() - done, static_cast<off_t>(sh.sh_offset + done));
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) return nullptr;
            done += static_cast<size_t>(n);
        }
        return code_.emplace_back(std::move(bytes)).data();
    }
    void relocations(Elf_Scn* scn, const GElf_Shdr& sh) {
        Elf_Data* data = elf_getdata(scn, nullptr);
        Elf_Scn* symscn = elf_getscn(elf_, sh.sh_link);
        GElf_Shdr symsh;
        Elf_Data* syms = symscn ? elf_getdata(symscn, nullptr) : nullptr;
        if (!data || !syms || !gelf_getshdr(symscn, &symsh) || !sh.sh_entsize || symsh.sh_offset > size_ ||
            symsh.sh_size > size_ - symsh.sh_offset)
            return;
        for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; ++i) {
            GElf_Rela r;
            GElf_Sym sym;
            if (!gelf_getrela(data, static_cast<int>(i), &r)) continue;
            auto type = GELF_R_TYPE(r.r_info);
            if ((type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) ||
                !gelf_getsym(syms, static_cast<int>(GELF_R_SYM(r.r_info)), &sym))
                continue;
            if (const char* name = elf_strptr(elf_, symsh.sh_link, sym.st_name); name && *name) got_slots_[r.r_offset] = name;
        }
    }
    int fd_ = -1;
    uint64_t size_ = 0; // the file's
    Elf* elf_ = nullptr;
    std::vector<Section> sections_;
    std::deque<std::vector<uint8_t>> code_; // the executable sections' bytes and .eh_frame_hdr's, read (read_section)
    std::unordered_map<uint64_t, std::string> got_slots_;
};

int32_t rel32(const uint8_t* p) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

// PLT stub address → symbol: every `jmp *disp(%rip)` (optionally `bnd`, optionally after an
// endbr64 that then starts the stub) in .plt, .plt.sec and .plt.got.
std::unordered_map<uint64_t, std::string> plt_stubs(const ElfImage& img) {
    std::unordered_map<uint64_t, std::string> stubs;
    for (const auto& s : img.sections()) {
        if (!s.bytes || !s.name.starts_with(".plt")) continue;
        for (uint64_t i = 0; i + 6 <= s.size; ++i) {
            size_t prefix = s.bytes[i] == 0xf2 ? 1 : 0; // bnd
            if (i + prefix + 6 > s.size || s.bytes[i + prefix] != 0xff || s.bytes[i + prefix + 1] != 0x25) continue;
            uint64_t jmp = s.addr + i, next = jmp + prefix + 6;
            auto it = img.got_slots().find(next + static_cast<int64_t>(rel32(s.bytes + i + prefix + 2)));
            if (it == img.got_slots().end()) continue;
            bool endbr = i >= 4 && std::memcmp(s.bytes + i - 4, "\xf3\x0f\x1e\xfa", 4) == 0;
            stubs[endbr ? jmp - 4 : jmp] = it->second;
        }
    }
    return stubs;
}

// Function starts from .eh_frame_hdr's sorted search table (datarel sdata4 entries, as every
// x86-64 linker writes them). Empty when the file has none in that form.
std::vector<uint64_t> function_starts(const ElfImage& img) {
    std::vector<uint64_t> starts;
    const Section* hdr = img.named(".eh_frame_hdr");
    if (!hdr || !hdr->bytes || hdr->size < 12 || hdr->bytes[0] != 1) return starts;
    uint8_t count_enc = hdr->bytes[2], table_enc = hdr->bytes[3];
    if (count_enc != 0x03 || table_enc != 0x3b) return starts; // udata4 count, datarel|sdata4 table
    uint32_t count;
    std::memcpy(&count, hdr->bytes + 8, 4); // after version/encodings (4) and the pcrel sdata4 eh_frame_ptr (4)
    if (12 + uint64_t{count} * 8 > hdr->size) return starts;
    for (uint32_t i = 0; i < count; ++i) starts.push_back(hdr->addr + static_cast<int64_t>(rel32(hdr->bytes + 12 + i * 8)));
    std::sort(starts.begin(), starts.end());
    return starts;
}


bool writes_second_arg(csh cs, const cs_insn* insn) {
    cs_regs read, written;
    uint8_t nread = 0, nwritten = 0;
    if (cs_regs_access(cs, insn, read, &nread, written, &nwritten) != CS_ERR_OK) return true;
    for (uint8_t i = 0; i < nwritten; ++i)
        if (written[i] == X86_REG_ESI || written[i] == X86_REG_RSI || written[i] == X86_REG_SI || written[i] == X86_REG_SIL) return true;
    return false;
}

// The value an instruction puts in %esi/%rsi when it is a plain immediate load (or xor with itself).
std::optional<uint64_t> immediate_second_arg(const cs_insn* insn) {
    const cs_x86& x = insn->detail->x86;
    if (x.op_count != 2 || x.operands[0].type != X86_OP_REG) return std::nullopt;
    x86_reg dst = x.operands[0].reg;
    if (dst != X86_REG_ESI && dst != X86_REG_RSI) return std::nullopt;
    if (insn->id == X86_INS_MOV && x.operands[1].type == X86_OP_IMM) return static_cast<uint64_t>(x.operands[1].imm);
    if (insn->id == X86_INS_XOR && x.operands[1].type == X86_OP_REG && x.operands[1].reg == dst) return 0;
    return std::nullopt;
}

bool ends_straight_line(const cs_insn* insn) {
    for (uint8_t i = 0; i < insn->detail->groups_count; ++i) {
        uint8_t g = insn->detail->groups[i];
        if (g == CS_GRP_JUMP || g == CS_GRP_CALL || g == CS_GRP_RET || g == CS_GRP_INT) return true;
    }
    return false;
}

// Disassembles the function [start, end) and confirms each candidate in it; appends the
// confirmed sites (each with the rel32 destination it calls, for naming).
void confirm_in_function(csh cs, const ElfImage& img, uint64_t start, uint64_t end, const std::vector<uint64_t>& candidates,
                         std::vector<std::pair<CallSite, uint64_t>>& out) {
    uint64_t file_offset = 0;
    std::vector<uint8_t> bytes = img.function_code(start, end - start, file_offset);
    std::vector<cs_insn*> insns;
    std::set<uint64_t> branch_targets;
    const uint8_t* code = bytes.data();
    size_t size = bytes.size();
    uint64_t addr = start;
    cs_insn* insn = cs_malloc(cs);
    while (cs_disasm_iter(cs, &code, &size, &addr, insn)) {
        const cs_x86& x = insn->detail->x86;
        bool branch = false;
        for (uint8_t i = 0; i < insn->detail->groups_count; ++i) branch |= insn->detail->groups[i] == CS_GRP_JUMP;
        if (branch && x.op_count == 1 && x.operands[0].type == X86_OP_IMM) branch_targets.insert(static_cast<uint64_t>(x.operands[0].imm));
        insns.push_back(insn);
        insn = cs_malloc(cs);
    }
    cs_free(insn, 1);
    for (uint64_t site : candidates) {
        auto it = std::lower_bound(insns.begin(), insns.end(), site, [](const cs_insn* i, uint64_t a) { return i->address < a; });
        if (it == insns.end() || (*it)->address != site || ((*it)->id != X86_INS_CALL && (*it)->id != X86_INS_JMP))
            continue; // not an instruction start
        CallSite c;
        c.vaddr = site;
        c.offset = file_offset + (site - start);
        c.function = start;
        if (!branch_targets.contains(site)) {
            for (auto back = it; back != insns.begin();) {
                --back;
                if (ends_straight_line(*back)) break;
                if (writes_second_arg(cs, *back)) {
                    c.second_arg = immediate_second_arg(*back);
                    break;
                }
                if (branch_targets.contains((*back)->address)) break; // reachable from elsewhere
            }
        }
        out.emplace_back(c, static_cast<uint64_t>((*it)->detail->x86.operands[0].imm));
    }
    for (cs_insn* i : insns) cs_free(i, 1);
}

} // namespace

Result<std::map<std::string, std::vector<CallSite>>> find_call_sites(const std::string& path,
                                                                     const std::vector<std::string>& functions) {
    ElfImage img;
    if (auto r = img.open(path); !r) return r.error();
    std::unordered_set<std::string_view> wanted(functions.begin(), functions.end());
    auto syms = ElfSymbols::load(path, &wanted);
    if (!syms) return syms.error();
    std::unordered_map<uint64_t, std::string> targets; // function or PLT stub → name
    for (const auto& f : functions)
        if (const ElfSymbol* s = (*syms)->find(f)) targets[s->vaddr] = f;
    for (const auto& [stub, name] : plt_stubs(img))
        if (wanted.contains(name)) targets[stub] = name;
    std::vector<uint64_t> starts = function_starts(img);
    if (starts.empty()) return make_error(ExitCode::Internal, path + ": no usable .eh_frame_hdr to find functions by");

    // Candidates: every E8 rel32 whose destination is a target, grouped by enclosing function;
    // the code is read a chunk at a time (4 bytes of each repeated: a call straddles two).
    std::map<uint64_t, std::vector<uint64_t>> by_function;
    std::set<uint64_t> seen; // a call in an overlap is met twice
    img.for_each_code_chunk(4, [&](const uint8_t* bytes, size_t length, uint64_t vaddr) {
        for (size_t i = 0; i + 5 <= length; ++i) {
            if (bytes[i] != 0xe8 && bytes[i] != 0xe9) continue; // call rel32, or jmp rel32 (a tail call)
            uint64_t at = vaddr + i;
            if (!targets.contains(at + 5 + static_cast<int64_t>(rel32(bytes + i + 1))) || !seen.insert(at).second) continue;
            auto fn = std::upper_bound(starts.begin(), starts.end(), at);
            if (fn != starts.begin()) by_function[*std::prev(fn)].push_back(at);
        }
    });
    csh cs;
    if (cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK) return make_error(ExitCode::Internal, "capstone is unusable");
    cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON);
    std::map<std::string, std::vector<CallSite>> found;
    for (const auto& [start, sites] : by_function) {
        auto next = std::upper_bound(starts.begin(), starts.end(), start);
        constexpr uint64_t kMaxFunction = 1u << 20; // the last function runs to its section's end (function_code cuts it)
        uint64_t end = next == starts.end() ? start + kMaxFunction : std::min(*next, start + kMaxFunction);
        std::vector<std::pair<CallSite, uint64_t>> confirmed;
        confirm_in_function(cs, img, start, end, sites, confirmed);
        for (const auto& [c, destination] : confirmed)
            if (auto t = targets.find(destination); t != targets.end()) found[t->second].push_back(c);
    }
    cs_close(&cs);
    return found;
}

std::vector<int64_t> first_load_displacements(const std::string& path, uint64_t vaddr, uint64_t size) {
    std::vector<int64_t> out;
    ElfImage img;
    uint64_t offset = 0;
    csh cs;
    if (!img.open(path, false) || cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK) return out;
    cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON);
    std::vector<uint8_t> bytes = img.function_code(vaddr, size, offset);
    const uint8_t* code = bytes.data();
    size_t left = bytes.size();
    uint64_t addr = vaddr;
    cs_insn* insn = cs_malloc(cs);
    while (cs_disasm_iter(cs, &code, &left, &addr, insn) && !ends_straight_line(insn)) {
        const cs_x86& x = insn->detail->x86;
        if (insn->id == X86_INS_MOV && x.op_count == 2 && x.operands[0].type == X86_OP_REG && x.operands[1].type == X86_OP_MEM &&
            x.operands[1].mem.base != X86_REG_RIP && x.operands[1].mem.index == X86_REG_INVALID)
            out.push_back(x.operands[1].mem.disp);
    }
    cs_free(insn, 1);
    cs_close(&cs);
    return out;
}

Result<std::map<uint64_t, std::vector<uint64_t>>> find_return_sites(const std::string& path,
                                                                    const std::vector<std::pair<uint64_t, uint64_t>>& functions) {
    ElfImage img;
    if (auto r = img.open(path, false); !r) return r.error();
    // A tail call ends the function as a ret does (its frame is gone: the callee returns to the
    // caller): a `jmp` to another function's start or to a PLT stub. torch 1.13's
    // Reducer::finalize_backward leaves that way whenever DDP samples its timings.
    std::vector<uint64_t> starts = function_starts(img);
    auto is_function = [&](uint64_t target) {
        for (const auto& s : img.sections())
            if (s.exec && s.name.starts_with(".plt") && target >= s.addr && target < s.addr + s.size) return true;
        return std::binary_search(starts.begin(), starts.end(), target);
    };
    csh cs;
    if (cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK) return make_error(ExitCode::Internal, "capstone is unusable");
    cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON);
    std::map<uint64_t, std::vector<uint64_t>> found;
    cs_insn* insn = cs_malloc(cs);
    for (const auto& [start, size] : functions) {
        uint64_t offset = 0;
        std::vector<uint8_t> bytes = size ? img.function_code(start, size, offset) : std::vector<uint8_t>{};
        if (bytes.empty()) continue;
        const uint8_t* code = bytes.data();
        size_t left = bytes.size();
        uint64_t addr = start;
        std::vector<uint64_t>& rets = found[start];
        while (cs_disasm_iter(cs, &code, &left, &addr, insn)) {
            bool leaves = insn->id == X86_INS_RET;
            if (insn->id == X86_INS_JMP && insn->detail->x86.op_count == 1 && insn->detail->x86.operands[0].type == X86_OP_IMM) {
                auto target = static_cast<uint64_t>(insn->detail->x86.operands[0].imm);
                leaves = (target < start || target >= start + size) && is_function(target);
            }
            if (leaves) rets.push_back(offset + (insn->address - start));
        }
    }
    cs_free(insn, 1);
    cs_close(&cs);
    return found;
}

} // namespace gtrace
