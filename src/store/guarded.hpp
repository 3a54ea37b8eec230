#pragma once
// Reading results files that may be damaged, without letting one take the others down. The
// HDF5 library trusts the lengths it finds in a file: a flipped length in the global heap (the
// variable-length strings) can crash it, hang it or make it allocate without bound. So every
// file is first read whole in a child process under a time and memory limit (common/contain),
// and what the child read comes back whole (store/result_codec): the parent never opens the file
// itself. Files that are not regular files
// (a FIFO would block open() forever) are never opened. A job's file is read while the job may
// still write it; a read that fails while the file changes (or that says "running" and changes
// within 3 s of its last change, longer than the writer's 2 s between durable flushes) is tried
// again, for at most 30 s: a reader that met a flush halfway does not call the file damaged.
// A file whose writer (its `writer` attribute, store/liveness.hpp) is a process of this machine
// that has ended is not waited for.
#include <functional>
#include <string>
#include <vector>

#include "store/check.hpp"
#include "store/reader.hpp"

namespace d500 {

// read_job_file, contained. Throws d500::Error "FILE: damaged: ..." naming what happened to the
// child (crashed with SIGSEGV, took longer than 60 s, needed more than 2 GiB) for a file that
// cannot be read safely, and "FILE: not a regular file (a FIFO)..." for what is not a file.
JobResult read_job_file_guarded(const std::string& path);

// read_job_file_guarded over many files, in order, with one contained child for a batch of them
// (up to 64 files, 64 MiB together): a run of 10^4 small files is not 10^4 forks. Calls
// each(i, result, error) for paths[i], in order, with the result or (result null) the error
// read_job_file_guarded would throw. A file the batch's child could not read (an error, a crash,
// a limit: damage, or a file being written) is read again alone by read_job_file_guarded, as
// are files that are not regular files (never opened in a batch), so every answer is the one
// the file would get alone.
void read_job_files_guarded(const std::vector<std::string>& paths,
                            const std::function<void(std::size_t, const JobResult*, const std::string&)>& each);

// check_file, contained: a file whose check crashes, hangs or runs out of memory gets one
// problem saying so.
CheckResult check_file_guarded(const std::string& path);

}  // namespace d500
