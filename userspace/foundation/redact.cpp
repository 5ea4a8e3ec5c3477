#include "foundation/redact.h"

#include <algorithm>
#include <array>
#include <cctype>

namespace gtrace {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

// "scheme://user:PASSWORD@host..." -> "scheme://user:***@host...", for every URL in the word.
std::string redact_url_passwords(std::string_view word) {
    std::string out;
    size_t pos = 0;
    for (size_t scheme; (scheme = word.find("://", pos)) != std::string_view::npos;) {
        size_t authority = scheme + 3;
        size_t end = word.find_first_of("/?#", authority);
        std::string_view host_part = word.substr(authority, end == std::string_view::npos ? std::string_view::npos : end - authority);
        size_t at = host_part.rfind('@');
        size_t colon = at == std::string_view::npos ? std::string_view::npos : host_part.substr(0, at).find(':');
        if (colon != std::string_view::npos && colon + 1 < at) {
            out.append(word.substr(pos, authority + colon + 1 - pos));
            out.append(kRedacted);
            pos = authority + at;
        } else {
            out.append(word.substr(pos, authority - pos));
            pos = authority;
        }
    }
    out.append(word.substr(pos));
    return out;
}

// Words in order; a secret option makes the next word its value.
class Redactor {
public:
    std::string word(std::string_view w) {
        if (pending_) {
            pending_ = false;
            if (!w.starts_with("--")) return std::string(kRedacted);
        }
        if (size_t eq = w.find('='); eq != std::string_view::npos) {
            if (eq + 1 < w.size() && looks_secret(w.substr(0, eq)) && w.substr(eq + 1) != kRedacted)
                return std::string(w.substr(0, eq + 1)).append(kRedacted);
        } else if (w.size() > 1 && w[0] == '-' && looks_secret(w)) {
            pending_ = true;
        }
        return redact_url_passwords(w);
    }

    // Words separated by whitespace, which is kept as it was.
    std::string text(std::string_view t) {
        std::string out;
        for (size_t pos = 0; pos < t.size();) {
            size_t end = pos;
            if (is_space(t[pos])) {
                while (end < t.size() && is_space(t[end])) ++end;
                out.append(t.substr(pos, end - pos));
            } else {
                while (end < t.size() && !is_space(t[end])) ++end;
                out.append(word(t.substr(pos, end - pos)));
            }
            pos = end;
        }
        return out;
    }

    // One argv element: a whole value after a secret option, even with spaces in it.
    std::string argument(std::string_view a) {
        if (pending_ && !a.starts_with("--")) {
            pending_ = false;
            return std::string(kRedacted);
        }
        return std::any_of(a.begin(), a.end(), is_space) ? text(a) : word(a);
    }

private:
    bool pending_ = false;
};

} // namespace

bool looks_secret(std::string_view name) {
    static constexpr std::array<std::string_view, 6> kWords = {"password", "passwd", "token", "secret", "key", "credential"};
    std::string lower(name);
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return std::any_of(kWords.begin(), kWords.end(), [&](std::string_view w) { return lower.find(w) != std::string::npos; });
}

std::vector<std::string> redact_argv(const std::vector<std::string>& argv) {
    Redactor r;
    std::vector<std::string> out;
    out.reserve(argv.size());
    for (const auto& a : argv) out.push_back(r.argument(a));
    return out;
}

std::string redact_text(std::string_view text) { return Redactor().text(text); }

} // namespace gtrace
