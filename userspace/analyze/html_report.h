// `gtrace report --html FILE`: one self-contained HTML page (inline CSS and JS, nothing fetched)
// that embeds the report's summary JSON and draws its charts in the browser. The page itself
// lives in html_report_template.html, embedded at build time.
#pragma once
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "foundation/result.h"

namespace gtrace {

// The page for `summary` (the object `gtrace report --json` writes), written to `path` (see
// write_output; `force` replaces an existing file).
Result<void> write_html_report(const nlohmann::json& summary, const std::string& path, bool force);

} // namespace gtrace
