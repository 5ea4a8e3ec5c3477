/* Linked into gtrace and its agent when libstdc++ is linked statically (GTRACE_STATIC).
   libstdc++.a's std::random_device calls arc4random when the build host's glibc has it (2.36+),
   which would make both need glibc 2.36 and refuse to run on Ubuntu 22.04 (2.35) or RHEL 9
   (2.34). This definition, from getrandom (glibc 2.25), satisfies that call inside the binary.
   Hidden: neither binary exports it. */
#include <stdint.h>
#include <sys/random.h>

__attribute__((visibility("hidden"))) uint32_t arc4random(void) {
    uint32_t value;
    while (getrandom(&value, sizeof value, 0) != (ssize_t)sizeof value) {
    }
    return value;
}
