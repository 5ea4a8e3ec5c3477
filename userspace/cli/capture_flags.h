// The command-line flags of gtrace attach and record, and what they become in CaptureOptions
// (capture/capture_options.h). A malformed value ends gtrace with one line and exit 2 (cli/command_line.h).
#pragma once
#include <string>

#include <boost/program_options.hpp>

#include "capture/capture_options.h"
#include "capture/launch.h"

namespace gtrace {

// attach's options: the shared ones, --pid and --system-wide.
boost::program_options::options_description attach_options();
// --allow-other-users' help (attach and dump).
const char* allow_other_users_help();
// record's: the shared ones and --on-stop. `parsing` adds attach's --pid and --system-wide, not
// shown in record's --help, only to say what to do instead.
boost::program_options::options_description record_options(bool parsing = false);

// The shared options' values (--pid is attach's, read by it).
void read_capture_options(const boost::program_options::variables_map& vm, CaptureOptions& options);
OnStop parse_on_stop(const std::string& text);
// The signal that --trigger or --flight-recorder answers (0: none).
int capture_signal(const CaptureOptions& options);
// A --step-marker that is not an ECMAScript regex is a usage error.
void check_step_marker(const std::string& marker);

} // namespace gtrace
