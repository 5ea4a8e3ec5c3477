// Numbers read from text that others control (/proc files, a target's environment, library
// names, traces): std::from_chars with the whole text required and the type's range checked,
// never an exception (std::stoi ended a capture once) and never a silent wrap.
#pragma once
#include <charconv>
#include <optional>
#include <string_view>
#include <system_error>

namespace gtrace {

// `text` as a decimal number of type T: digits only (a '-' only for signed T), nothing after,
// within T's range. nullopt otherwise, and for nullptr.
template <typename T>
std::optional<T> parse_decimal(std::string_view text) {
    T value{};
    if (text.empty() || text[0] == '+') return std::nullopt;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, 10);
    if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
    return value;
}
template <typename T>
std::optional<T> parse_decimal(const char* text) {
    return text ? parse_decimal<T>(std::string_view(text)) : std::nullopt;
}

// The same for hexadecimal digits (no "0x").
template <typename T>
std::optional<T> parse_hex(std::string_view text) {
    T value{};
    if (text.empty() || text[0] == '+' || text[0] == '-') return std::nullopt;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, 16);
    if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
    return value;
}

} // namespace gtrace
