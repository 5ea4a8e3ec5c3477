// Exit codes of the gtrace command, documented in `gtrace --help` and the README.
#pragma once

namespace gtrace {

enum class ExitCode : int {
    Ok = 0,
    Internal = 1,           // unexpected failure inside gtrace
    Usage = 2,              // bad command line: unknown option, malformed value
    NoSuchProcess = 3,      // the PID does not exist
    ProcessExited = 4,      // the process exited while gtrace was attaching
    KernelThread = 5,       // the PID is a kernel thread
    Privileges = 6,         // not root and missing CAP_BPF + CAP_PERFMON
    KernelUnsupported = 7,  // no BTF, a missing BPF feature, or BPF/uprobes refused by the kernel
    OutputUnwritable = 8,   // output directory missing or not writable; a directory, link or special file at the path
    OutputExists = 9,       // output file (or a killed capture's FILE.partial) exists and --force was not given
    CommandFailed = 10,     // gtrace record: the command could not be started
    BadTrace = 11,          // gtrace report: the file is not a complete gtrace trace
    ScriptIncomplete = 12,  // --steps: the capture ended before its last step (trace written)
    WriteFailed = 13,       // writing an output failed mid-capture (disk full, I/O error, quota); a shorter trace is kept
};

inline int to_int(ExitCode c) { return static_cast<int>(c); }

constexpr const char* kExitCodeHelp =
    "Exit codes:\n"
    "  0  capture finished (a capture that lost events says so but still exits 0)\n"
    "  1  internal error\n"
    "  2  bad command line (unknown option, malformed duration or size, an empty file name, two outputs naming\n"
    "     one file, an output naming an input)\n"
    "  3  no process with that PID\n"
    "  4  the process exited while gtrace was attaching\n"
    "  5  the PID is a kernel thread\n"
    "  6  missing privileges (run as root, or grant CAP_BPF and CAP_PERFMON)\n"
    "  7  the kernel lacks BTF or a BPF feature gtrace needs (named), or refused BPF/uprobes\n"
    "  8  output directory does not exist or is not writable, or the output path is a directory, a symbolic link\n"
    "     or a special file (never written through or replaced, even with --force)\n"
    "  9  output file exists (use --force to replace it), or a killed capture's FILE.partial is in the way\n"
    "     (complete it with gtrace recover, or discard it with --force)\n"
    "  10 gtrace record: the command could not be started (not found, not executable)\n"
    "  11 gtrace report, recover: a file is not a trace gtrace wrote (a FILE.partial is read up to its last whole event)\n"
    "  12 --steps A:B: the capture ended (job exit, --duration, Ctrl-C) before step B; the trace holds what was captured\n"
    "  13 a write failed (disk full, I/O error, quota): the capture stopped, and the trace is complete but cut short\n"
    "     (otherData.cut says how much)\n";

} // namespace gtrace
