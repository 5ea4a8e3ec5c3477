// What every gtrace command does with its command line: options parsed with Boost, stray
// arguments refused, and an error ending gtrace with one line on stderr and the error's exit code.
#pragma once
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "foundation/result.h"

namespace gtrace {

// "gtrace: error: MESSAGE" on stderr, then exit with the error's code.
[[noreturn]] void fail(const Error& e);

template <typename T>
T or_fail(Result<T> r) {
    if (!r) fail(r.error());
    return std::move(r.value());
}

inline void or_fail(Result<void> r) {
    if (!r) fail(r.error());
}

// Parses a command's options; an argument that is neither an option, an option's value nor a
// declared positional one is an error (exit 2) naming `command`'s --help.
boost::program_options::variables_map parse_options(const std::vector<std::string>& args,
                                                    const boost::program_options::options_description& desc,
                                                    const std::string& command,
                                                    const boost::program_options::positional_options_description* positional = nullptr);

} // namespace gtrace
