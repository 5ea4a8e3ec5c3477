// Secrets on command lines, hidden before they reach a trace, a summary or a report (which users
// share). Redaction keeps the name and replaces the value with "***":
//  - NAME=VALUE, --NAME=VALUE (an environment assignment, `env X=Y cmd`, an option): when NAME
//    looks secret;
//  - -NAME VALUE, --NAME VALUE: when NAME looks secret, the next argument, unless it is itself a
//    long option (--...). Paths count as values: `--key-file /k.pem` shows as `--key-file ***`;
//  - scheme://user:PASSWORD@host anywhere in an argument: the password.
// A name looks secret when it contains, in any case, password, passwd, token, secret, key or
// credential (--db-password, --hf_token, AWS_SECRET_ACCESS_KEY, --api-key; also, harmlessly,
// --max-tokens). An argument with spaces in it (`sh -c "... --password x"`) is redacted word by
// word as well.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace gtrace {

inline constexpr std::string_view kRedacted = "***";

// Whether an option or variable name (dashes and all) looks like it holds a secret.
bool looks_secret(std::string_view name);

// argv with secret values replaced.
std::vector<std::string> redact_argv(const std::vector<std::string>& argv);

// A command line already joined into words (a process label, a shell script): the same rules,
// word by word, whitespace kept.
std::string redact_text(std::string_view text);

} // namespace gtrace
