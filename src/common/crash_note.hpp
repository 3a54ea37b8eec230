#pragma once
// A line on stderr when a process dies of a fault (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT),
// saying who it was and what it was doing: "d500-worker: rank 4 on d500n3 crashed with SIGSEGV
// in point 1/4 795a962f134f024d". A job of many ranks on many nodes otherwise leaves only
// srun's "task 4: Segmentation fault" and MPI's backtrace of raw addresses; this names the point
// that a resumed job would run first again. The handler writes with write(2) only, then hands
// the signal to the handler that was there before (Open MPI's prints its backtrace), or, where
// there was none, prints a backtrace itself (glibc's backtrace_symbols_fd) and lets the default
// action end the process: it still dies of the signal, its exit status unchanged.
#include <string>

namespace d500 {

// Installs the note for the faults above, chained to their present handlers; `who` starts the
// line ("d500-worker: rank 4 on d500n3"). Again: `who` is replaced, and the note is installed
// anew only for a fault whose handler something else has since replaced (chained to that one).
void install_crash_note(const std::string& who);

// What the process is doing, appended to the note ("in point 1/4 795a962f134f024d"); "" for
// nothing. Not for a signal handler: called from ordinary code, as often as it changes.
void set_crash_context(const std::string& what);

// What set_crash_context last said ("" for nothing), for ordinary code's messages.
std::string crash_context();

// Whether a line of a job's output is a worker's crash note.
bool is_crash_note(const std::string& line);

// The context of a worker inside MPI_Init, and whether some line of `output` (a job's log, or
// `d500 run`'s lines with their "[1/2 job-0000] " prefix) is a crash note with that context: a
// rank that died in the MPI library's start-up, before d500 ran a point.
extern const char kInsideMpiInit[];
bool crashed_inside_mpi_init(const std::string& output);

}  // namespace d500
