// Secret values on command lines: which names look secret, and every shape of argument that
// carries one.
#include <catch2/catch.hpp>

#include "discover/proc_tree.h"
#include "foundation/redact.h"

using namespace gtrace;

namespace {

std::string redacted(std::vector<std::string> argv) { return join_argv(redact_argv(argv)); }

} // namespace

TEST_CASE("secret-looking names, in any case, anywhere in the name") {
    for (const char* name : {"--password", "--db-password", "--DB_PASSWORD", "passwd", "--hf_token", "HF_TOKEN", "--api-key",
                             "AWS_SECRET_ACCESS_KEY", "--client-secret", "--credentials", "GOOGLE_APPLICATION_CREDENTIALS",
                             "--key-file", "-Token", "--max-tokens"})
        CHECK(looks_secret(name));
    for (const char* name : {"--lr", "--batch-size", "--output", "PATH", "RANK", "--pass", "--kee", "--cred", "--sec"})
        CHECK_FALSE(looks_secret(name));
}

TEST_CASE("option=value, option value, NAME=value: the value hidden, the name kept") {
    CHECK(redacted({"python", "train.py", "--password=hunter2"}) == "python train.py --password=***");
    CHECK(redacted({"python", "train.py", "--password", "hunter2", "--lr", "0.1"}) == "python train.py --password *** --lr 0.1");
    CHECK(redacted({"env", "PASSWORD=x", "python", "train.py"}) == "env PASSWORD=*** python train.py");
    CHECK(redacted({"env", "AWS_SECRET_ACCESS_KEY=abc/def=", "aws", "s3", "ls"}) == "env AWS_SECRET_ACCESS_KEY=*** aws s3 ls");
    CHECK(redacted({"train", "--hf_token=hf_abc", "--db-password", "pw", "-api-key", "k"}) ==
          "train --hf_token=*** --db-password *** -api-key ***");
    // A path after a secret-looking option is hidden too: the rule does not guess at values.
    CHECK(redacted({"serve", "--key-file", "/etc/ssl/k.pem"}) == "serve --key-file ***");
    // A secret option followed by another long option has no value to hide.
    CHECK(redacted({"hf", "--use-auth-token", "--model", "gpt2"}) == "hf --use-auth-token --model gpt2");
    // ... but a value starting with one dash is hidden.
    CHECK(redacted({"db", "--password", "-x!y"}) == "db --password ***");
    // A value with spaces is hidden whole.
    CHECK(redacted({"db", "--password", "correct horse battery"}) == "db --password ***");
    // Nothing to hide.
    CHECK(redacted({"python", "-u", "train.py", "--lr=0.1", "--password="}) == "python -u train.py --lr=0.1 --password=");
    CHECK(redacted({"python", "train.py", "--password"}) == "python train.py --password");
    CHECK(redacted({}).empty());
}

TEST_CASE("credentials inside URLs and query strings") {
    CHECK(redacted({"psql", "postgres://alice:hunter2@db:5432/x"}) == "psql postgres://alice:***@db:5432/x");
    CHECK(redacted({"run", "--db=mysql://u:p@h/d", "--mirror=https://h/x"}) == "run --db=mysql://u:***@h/d --mirror=https://h/x");
    CHECK(redacted({"curl", "https://h/api?token=abc"}) == "curl https://h/api?token=***");
    CHECK(redacted({"git", "clone", "https://user@host/repo"}) == "git clone https://user@host/repo");
}

TEST_CASE("a shell script argument is redacted word by word") {
    CHECK(redacted({"sh", "-c", "PASSWORD=x python train.py --password hunter2  --lr 1"}) ==
          "sh -c PASSWORD=*** python train.py --password ***  --lr 1");
    CHECK(redact_text("rank 0 · python train.py --password hunter2 --api-token=t (pid 12)") ==
          "rank 0 · python train.py --password *** --api-token=*** (pid 12)");
    // Already redacted text stays as it is.
    CHECK(redact_text("python train.py --password *** --token=***") == "python train.py --password *** --token=***");
}
