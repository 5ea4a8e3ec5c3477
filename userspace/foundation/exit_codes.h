// Exit codes of the gtrace command, documented per command in its --help (cli/exit_code_help.cpp)
// and in docs/usage.md.
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

} // namespace gtrace
