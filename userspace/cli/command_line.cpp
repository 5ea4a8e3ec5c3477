#include "cli/command_line.h"

#include <fmt/format.h>

namespace gtrace {

namespace po = boost::program_options;

po::variables_map parse_options(const std::vector<std::string>& args, const po::options_description& desc,
                                const std::string& command, const po::positional_options_description* positional) {
    po::command_line_parser parser(args);
    parser.options(desc);
    if (positional) parser.positional(*positional);
    po::parsed_options parsed = parser.run();
    for (const auto& opt : parsed.options)
        if (opt.string_key.empty() && !opt.original_tokens.empty())
            fail(make_error(ExitCode::Usage, fmt::format("unexpected argument '{}'; {}see gtrace {} --help", opt.original_tokens.front(),
                                                         command == "record" ? "the command goes after --; " : "", command)));
    po::variables_map vm;
    po::store(parsed, vm);
    po::notify(vm);
    return vm;
}

} // namespace gtrace
