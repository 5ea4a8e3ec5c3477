// A JSON file another user or node may have written (a dump, a report's summary), read as the
// user who ran gtrace (under sudo: their file-system credentials, so root's files stay root's):
// a regular file only (a FIFO never blocks gtrace), at most `max_bytes`, nested at most 64 deep.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "foundation/result.h"

namespace gtrace {

// `what` names the kind of file in messages ("a dump's JSON"). Errors: BadTrace, one line.
// Members named in `skipped_keys` (at any depth) are parsed past and not kept.
Result<nlohmann::json> read_json_file(const std::string& path, size_t max_bytes, std::string_view what,
                                      const std::vector<std::string>& skipped_keys = {});

} // namespace gtrace
