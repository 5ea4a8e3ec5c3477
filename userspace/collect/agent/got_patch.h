// Redirecting another loaded object's calls to a library function, as LD_PRELOAD would have
// (plthook and libbpf-tools' uprobe helpers read the same tables): each object's dynamic
// relocations name the functions it imports, and the slot each one's calls go through (its
// GOT entry). Writing our function's address into a slot makes that object's calls land on
// it; every other object, and the library itself, stay as they were.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace gtrace::agent {

struct GotRedirect {
    const char* symbol;    // the imported function, e.g. "cuptiActivityEnable"
    void* replacement;     // where that object's calls go from now on
    void** real = nullptr; // set to the function the object would have called (found through the object's own scope)
};

struct GotPatchResult {
    int slots = 0;                  // slots written now
    std::vector<std::string> bound; // objects whose imports are redirected (now or before)
};

// Redirects, in every loaded object except those whose path contains one of `skip` (and this
// library), each import of a function in `redirects`. An import is redirected only where it
// resolves to `*real` when that is set (else *real is set to the first one found): an object
// bound to another copy of the library is left alone. Slots already pointing at the
// replacement are left alone: call it again after new objects were loaded.
GotPatchResult redirect_imports(std::vector<GotRedirect>& redirects, const std::vector<std::string>& skip);

} // namespace gtrace::agent
