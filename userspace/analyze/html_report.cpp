#include "analyze/html_report.h"

#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "foundation/output_file.h"
#include "html_report_template.h" // generated from html_report_template.html by CMakeLists.txt

namespace gtrace {
namespace {

constexpr std::string_view kDataPlaceholder = "@GTRACE_SUMMARY_JSON@";

// JSON safe inside <script>: a '<' only ever occurs inside JSON strings, where \u003c means the
// same, so "</script>" and "<!--" in a kernel name cannot end or disturb the element.
std::string script_safe_json(const nlohmann::json& j) {
    // Trace strings (kernel names, command lines) are not guaranteed UTF-8: replace, don't throw.
    std::string raw = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), out;
    out.reserve(raw.size() + raw.size() / 16);
    for (char c : raw) {
        switch (c) {
        case '<': out += "\\u003c"; break;
        case '>': out += "\\u003e"; break;
        case '&': out += "\\u0026"; break;
        default: out += c;
        }
    }
    return out;
}

} // namespace

Result<void> write_html_report(const nlohmann::json& summary, const std::string& path, bool force) {
    std::string_view page = kHtmlReportTemplate;
    size_t at = page.find(kDataPlaceholder);
    if (at == std::string_view::npos || page.find(kDataPlaceholder, at + 1) != std::string_view::npos)
        return make_error(ExitCode::Internal, "the HTML report template must hold the data placeholder exactly once");
    std::string html(page.substr(0, at));
    html += script_safe_json(summary);
    html += page.substr(at + kDataPlaceholder.size());
    return write_output(path, html, force);
}

} // namespace gtrace
