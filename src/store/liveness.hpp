#pragma once
// Who writes a results file, so that a reader on the same machine can tell a running job's
// file from a dead job's: rank 0's identity, stored as the file's `writer` attribute when the
// job creates it. A reader that meets a damaged file saying "running" waits for it to change
// (store/guarded.cpp) unless the writer is known to be gone: same boot, same PID namespace, same
// host, and no such process. Anywhere else (another node, a container) nothing is known, and the
// reader waits as before.
#include <string>

namespace d500 {

// This process's identity as a writer: "boot=<boot_id> pidns=<namespace> host=<hostname> pid=<pid>"
// (Linux: /proc/sys/kernel/random/boot_id, /proc/self/ns/pid).
std::string writer_identity();
// The same for another process of this machine (tests: a process that has ended).
std::string writer_identity(long pid);

// Whether `identity` names a process of this boot, PID namespace and host that no longer exists.
// False when it cannot be known (another machine, a malformed or empty identity, a live process,
// or one whose pid was reused).
bool writer_gone(const std::string& identity);

}  // namespace d500
