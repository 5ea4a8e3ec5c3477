#include "foundation/json_file.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include <fmt/format.h>

#include "foundation/input_file.h"
#include "foundation/privilege.h"

namespace gtrace {
namespace {

constexpr int kMaxDepth = 64;

// The deepest nesting of objects and arrays, strings skipped: a hostile file of a million '['
// is refused before a parser recurses into it.
int nesting_depth(std::string_view text) {
    int depth = 0, deepest = 0;
    bool in_string = false;
    for (size_t i = 0; i < text.size(); ++i) {
        char c = text[i];
        if (in_string) {
            if (c == '\\') ++i;
            else if (c == '"') in_string = false;
        } else if (c == '"') in_string = true;
        else if (c == '[' || c == '{') deepest = std::max(deepest, ++depth);
        else if (c == ']' || c == '}') --depth;
    }
    return deepest;
}

} // namespace

Result<nlohmann::json> read_json_file(const std::string& path, size_t max_bytes, std::string_view what,
                                      const std::vector<std::string>& skipped_keys) {
    std::string text;
    {
        AsInvoker as_invoker;
        if (!as_invoker.ok()) return make_error(ExitCode::Privileges, "cannot take the file-system credentials of the user who ran sudo");
        auto file = open_input_file(path, ExitCode::BadTrace);
        if (!file) return make_error(ExitCode::BadTrace, file.error().message);
        if (file->size() > max_bytes)
            return make_error(ExitCode::BadTrace, fmt::format("{}: larger than {} ({} MiB)", path, what, max_bytes >> 20));
        text.resize(static_cast<size_t>(file->size()));
        size_t got = 0;
        while (got < text.size()) {
            ssize_t n = pread(file->fd(), text.data() + got, text.size() - got, static_cast<off_t>(got));
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) break;
            got += static_cast<size_t>(n);
        }
        text.resize(got); // a file cut while read: the parse below says so
    }
    if (nesting_depth(text) > kMaxDepth)
        return make_error(ExitCode::BadTrace, fmt::format("{}: nested deeper than {} levels: not {}", path, kMaxDepth, what));
    nlohmann::json::parser_callback_t keep = nullptr;
    if (!skipped_keys.empty())
        keep = [&](int, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
            return event != nlohmann::json::parse_event_t::key || !parsed.is_string() ||
                   std::find(skipped_keys.begin(), skipped_keys.end(), parsed.get_ref<const std::string&>()) == skipped_keys.end();
        };
    nlohmann::json j = nlohmann::json::parse(text, keep, false);
    if (j.is_discarded()) return make_error(ExitCode::BadTrace, fmt::format("{}: not JSON, so not {}", path, what));
    return j;
}

} // namespace gtrace
