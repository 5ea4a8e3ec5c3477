#include "cli/exit_code_help.h"

#include <algorithm>

#include <fmt/format.h>

#include "foundation/exit_codes.h"

namespace gtrace {
namespace {

constexpr std::string_view kAllCommands = "attach record report recover merge dump ps";

struct CodeHelp {
    ExitCode code;
    std::string_view commands; // the commands that can return it, space-separated
    std::string_view text;
};

constexpr CodeHelp kCodes[] = {
    {ExitCode::Ok, "attach record", "capture finished (a capture that lost events says so but still exits 0)"},
    {ExitCode::Ok, "report", "report printed (and written)"},
    {ExitCode::Ok, "recover", "trace completed"},
    {ExitCode::Ok, "merge", "traces merged"},
    {ExitCode::Ok, "dump", "stacks printed"},
    {ExitCode::Ok, "ps", "jobs listed, or none found (\"no jobs found\")"},
    {ExitCode::Internal, kAllCommands, "internal error"},
    {ExitCode::Usage, "attach record",
     "bad command line (unknown option, a stray argument, malformed duration or size, an empty file name, two\n"
     "     outputs naming one file, an output naming an input)"},
    {ExitCode::Usage, "report recover merge",
     "bad command line (unknown option, a stray argument, an empty file name, two outputs naming one file, an\n"
     "     output naming an input)"},
    {ExitCode::Usage, "merge", "fewer than two traces, or traces that are not one per node of one job (a rank in two of them)"},
    {ExitCode::Usage, "dump", "bad command line (unknown option, a stray argument, a malformed PID)"},
    {ExitCode::Usage, "ps", "bad command line (unknown option, a stray argument)"},
    {ExitCode::Usage, "attach dump", "--pid of gtrace itself, or a tree that is the whole host without --system-wide"},
    {ExitCode::NoSuchProcess, "attach dump", "no process with that PID"},
    {ExitCode::ProcessExited, "attach dump", "the process exited while gtrace was attaching"},
    {ExitCode::KernelThread, "attach dump", "the PID is a kernel thread"},
    {ExitCode::Privileges, "attach record", "missing privileges (run as root, or grant CAP_BPF and CAP_PERFMON)"},
    {ExitCode::Privileges, "dump", "missing privileges (run as root, or grant CAP_SYS_PTRACE)"},
    {ExitCode::KernelUnsupported, "attach record", "the kernel lacks BTF or a BPF feature gtrace needs (named), or refused BPF/uprobes"},
    {ExitCode::OutputUnwritable, "attach record report recover merge",
     "output directory does not exist or is not writable, or the output path is a directory, a symbolic link\n"
     "     or a special file (never written through or replaced, even with --force)"},
    {ExitCode::OutputExists, "attach record", "output file exists (use --force to replace it), or a killed capture's FILE.partial is in the way\n"
                                              "     (complete it with gtrace recover, or discard it with --force)"},
    {ExitCode::OutputExists, "report recover merge", "output file exists (use --force to replace it)"},
    {ExitCode::CommandFailed, "record", "the command could not be started (not found, not executable)"},
    {ExitCode::BadTrace, "report recover",
     "a file is not a trace gtrace wrote, or not a regular file (a FILE.partial is read up to its last whole event)"},
    {ExitCode::BadTrace, "merge", "a file is not a .pftrace gtrace wrote, or not a regular file"},
    {ExitCode::ScriptIncomplete, "attach record",
     "--steps A:B: the capture ended (job exit, --duration, Ctrl-C) before step B; the trace holds what was captured"},
    {ExitCode::WriteFailed, "attach record", "a write failed (disk full, I/O error, quota): the capture stopped, and the trace is complete but\n"
                                             "     cut short (otherData.cut says how much)"},
    {ExitCode::WriteFailed, "report recover merge", "a write failed (disk full, I/O error, quota)"},
};

bool lists(std::string_view commands, std::string_view command) {
    for (size_t pos = 0; pos < commands.size();) {
        size_t end = std::min(commands.find(' ', pos), commands.size());
        if (commands.substr(pos, end - pos) == command) return true;
        pos = end + 1;
    }
    return false;
}

} // namespace

std::string exit_code_help(std::string_view command) {
    std::string out = "Exit codes:\n";
    int last = -1;
    for (const CodeHelp& c : kCodes) {
        if (!command.empty() && !lists(c.commands, command)) continue;
        const int code = to_int(c.code);
        std::string who = command.empty() && c.commands != kAllCommands ? fmt::format("{}: ", c.commands) : "";
        out += fmt::format("  {:<2} {}{}\n", code == last ? "" : std::to_string(code), who, c.text);
        last = code;
    }
    return out;
}

} // namespace gtrace
