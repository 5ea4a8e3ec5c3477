// The exit codes each command can end with, for its --help (docs/usage.md's table lists them all).
#pragma once
#include <string>
#include <string_view>

namespace gtrace {

// "Exit codes:\n" and one entry per code `command` can return (attach, record, report, recover,
// dump, ps); an empty `command` lists every code, for `gtrace --help`.
std::string exit_code_help(std::string_view command);

} // namespace gtrace
