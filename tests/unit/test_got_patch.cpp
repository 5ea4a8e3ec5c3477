// The agent's GOT redirection (userspace/collect/agent/got_patch.h), on a library that imports
// getppid: built with lazy binding (its PLT slot unresolved until the first call) and with -z now
// (resolved at load, in RELRO: read-only).
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "collect/agent/got_patch.h"

namespace {

constexpr int kRedirected = 424242;
extern "C" pid_t fake_getppid() { return kRedirected; }

void check_target(const std::string& file, bool call_first) {
    void* lib = dlopen((std::string(TEST_PROGRAMS) + "/" + file).c_str(), RTLD_NOW | RTLD_LOCAL);
    REQUIRE(lib);
    auto call = reinterpret_cast<int (*)()>(dlsym(lib, "got_patch_target_call"));
    REQUIRE(call);
    if (call_first) REQUIRE(call() == getppid()); // a lazy slot resolved before
    void* real = nullptr;
    std::vector<gtrace::agent::GotRedirect> to_fake = {{"getppid", reinterpret_cast<void*>(&fake_getppid), &real}};
    auto r = gtrace::agent::redirect_imports(to_fake, {});
    CHECK(r.slots >= 1);
    CHECK(std::find_if(r.bound.begin(), r.bound.end(), [&](const std::string& b) { return b.find(file) != std::string::npos; }) != r.bound.end());
    CHECK(call() == kRedirected);                                  // the library's calls land on the replacement
    CHECK(real == dlsym(RTLD_DEFAULT, "getppid"));                 // the function it would have called
    CHECK(gtrace::agent::redirect_imports(to_fake, {}).slots == 0);               // already redirected: left alone
    // An import bound elsewhere than the expected function is left alone.
    void* elsewhere = reinterpret_cast<void*>(&fake_getppid);
    std::vector<gtrace::agent::GotRedirect> back = {{"getppid", real, &elsewhere}};
    CHECK(gtrace::agent::redirect_imports(back, {}).slots == 0);
    CHECK(call() == kRedirected);
    // Back to the real function (the slots point at it again), for the tests after this one.
    void* none = nullptr;
    std::vector<gtrace::agent::GotRedirect> restore = {{"getppid", real, &none}};
    CHECK(gtrace::agent::redirect_imports(restore, {}).slots >= 1);
    CHECK(call() == getppid());
    dlclose(lib);
}

} // namespace

TEST_CASE("got_patch redirects a lazily bound import, unresolved or resolved", "[got_patch]") {
    check_target("libgot_patch_lazy.so", false);
    check_target("libgot_patch_lazy.so", true);
}

TEST_CASE("got_patch redirects an import bound at load, through RELRO", "[got_patch]") {
    check_target("libgot_patch_now.so", false);
}
