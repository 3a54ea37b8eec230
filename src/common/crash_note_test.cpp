// The crash note in a real child process that really faults: the line names who and what, the
// handler that was there before still runs, and the process still dies of its signal.
// (Built into the integration-test binary, whose main does not start MPI: fork's rules.)
#include "common/crash_note.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <string>

using namespace d500;

namespace {

struct Died {
  std::string err;  // what the child wrote to stderr
  int signal = 0;   // the signal it died of, 0 if it exited
};

Died in_child(const std::function<void()>& body) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    body();
    _exit(0);
  }
  close(fds[1]);
  Died d;
  char buf[512];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) d.err.append(buf, static_cast<std::size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) d.signal = WTERMSIG(status);
  return d;
}

extern "C" void earlier_handler(int sig, siginfo_t*, void*) {
  const char text[] = "the earlier handler ran\n";
  if (write(STDERR_FILENO, text, sizeof text - 1) < 0) _exit(3);
  signal(sig, SIG_DFL);
  raise(sig);
}

}  // namespace

TEST(CrashNote, AFaultNamesWhoAndWhatAndTheProcessStillDiesOfIt) {
  const Died d = in_child([] {
    install_crash_note("d500-worker: rank 4 on d500n3");
    set_crash_context("in point 1/4 795a962f134f024d");
    set_crash_context("in point 2/4 ab6fa4f0843cd843");  // the latest context is the one told
    *static_cast<volatile int*>(nullptr) = 1;
  });
  EXPECT_EQ(d.signal, SIGSEGV);
  const std::string note = "d500-worker: rank 4 on d500n3 crashed with SIGSEGV in point 2/4 ab6fa4f0843cd843\n";
  EXPECT_EQ(d.err.substr(0, note.size()), note);
  EXPECT_TRUE(is_crash_note(note.substr(0, note.size() - 1)));
  // No handler was there before: the note prints the backtrace itself, this test's frames in it.
  EXPECT_EQ(d.err.substr(note.size(), 11), "backtrace:\n") << d.err;
  EXPECT_NE(d.err.find("d500_integration_tests"), std::string::npos) << d.err;
  EXPECT_FALSE(is_crash_note("d500-worker: point 795a962f134f024d: the backend failed"));
}

TEST(CrashNote, TheHandlerThatWasThereBeforeRunsAfterTheNote) {
  const Died d = in_child([] {
    struct sigaction sa {};
    sa.sa_sigaction = earlier_handler;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGFPE, &sa, nullptr);  // as MPI_Init installs its backtrace printer
    install_crash_note("d500-worker: rank 0 on vm");
    set_crash_context("");
    raise(SIGFPE);
  });
  EXPECT_EQ(d.signal, SIGFPE);
  EXPECT_EQ(d.err, "d500-worker: rank 0 on vm crashed with SIGFPE\nthe earlier handler ran\n");
}

TEST(CrashNote, AnAbortIsNotedAndAnOrdinaryEndIsNot) {
  const Died aborted = in_child([] {
    install_crash_note("d500-worker: rank 1 on vm");
    set_crash_context("after the job's last point, writing its end");
    abort();
  });
  EXPECT_EQ(aborted.signal, SIGABRT);
  EXPECT_EQ(aborted.err.substr(0, aborted.err.find("backtrace:\n")),
            "d500-worker: rank 1 on vm crashed with SIGABRT after the job's last point, writing its end\n");
  const Died fine = in_child([] { install_crash_note("d500-worker: rank 1 on vm"); });
  EXPECT_EQ(fine.signal, 0);
  EXPECT_EQ(fine.err, "");
}

// The worker installs the note before MPI_Init, which then leaves it in place (Open MPI puts
// its own printer only where it finds no handler). A library that replaces it anyway is
// chained to when the note is installed again, under its new name.
TEST(CrashNote, InstalledAgainAfterAnotherHandlerReplacedItTheNoteComesFirstThenThatHandler) {
  const Died d = in_child([] {
    install_crash_note("d500-worker: task 5 on d500n2");
    set_crash_context(kInsideMpiInit);
    struct sigaction sa {};
    sa.sa_sigaction = earlier_handler;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, nullptr);  // a library's own handler, put in the note's place
    install_crash_note("d500-worker: rank 5 on d500n2");
    set_crash_context("before the job's first point");
    install_crash_note("d500-worker: rank 5 on d500n2");  // still the note's: not chained to itself
    *static_cast<volatile int*>(nullptr) = 1;
  });
  EXPECT_EQ(d.signal, SIGSEGV);
  EXPECT_EQ(d.err,
            "d500-worker: rank 5 on d500n2 crashed with SIGSEGV before the job's first point\n"
            "the earlier handler ran\n");
}

TEST(CrashNote, ACrashInsideMpiInitIsToldFromOneInAPointAndFromTheWordsAlone) {
  const std::string note = std::string("d500-worker: task 5 on d500n2 crashed with SIGSEGV ") + kInsideMpiInit;
  EXPECT_TRUE(crashed_inside_mpi_init("srun: error\n" + note + "\nbacktrace:\n"));
  EXPECT_TRUE(crashed_inside_mpi_init("[1/1 job-0000] " + note));  // as `d500 run` shows it
  EXPECT_FALSE(
      crashed_inside_mpi_init("d500-worker: rank 5 on d500n2 crashed with SIGSEGV in point 1/4 ab6fa4f0843cd843"));
  EXPECT_FALSE(crashed_inside_mpi_init(std::string("a log that quotes ") + kInsideMpiInit));  // no crash note
  EXPECT_FALSE(crashed_inside_mpi_init(""));
}
