#pragma once
// Every MPI call of the worker, the writer and the harness goes through mpi_check, as every
// HDF5 call goes through h5::check: a failure throws d500::Error naming the call, what it was
// for and MPI's own message. The worker sets MPI_ERRORS_RETURN on its communicator so that
// failures come back as codes instead of ending the process inside the library.
#include <mpi.h>

#include <string>

#include "common/error.hpp"

namespace d500 {

[[noreturn]] inline void mpi_fail(int rc, const char* call, const std::string& what) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) len = 0;
  throw Error(std::string(call) + " failed (" + what +
              "): " + (len > 0 ? std::string(msg, static_cast<std::size_t>(len)) : "MPI error " + std::to_string(rc)));
}

// The success path is one comparison and builds nothing: safe inside a timed region.
inline void mpi_check(int rc, const char* call, const char* what) {
  if (rc != MPI_SUCCESS) mpi_fail(rc, call, what);
}
inline void mpi_check(int rc, const char* call, const std::string& what) {
  if (rc != MPI_SUCCESS) mpi_fail(rc, call, what);
}

// The root's string on every rank (collective): an attribute value every rank must write alike,
// or an answer one rank found.
inline std::string bcast_string(std::string s, MPI_Comm comm, int root = 0) {
  long long n = static_cast<long long>(s.size());
  mpi_check(MPI_Bcast(&n, 1, MPI_LONG_LONG, root, comm), "MPI_Bcast", "a string");
  s.resize(static_cast<std::size_t>(n));
  mpi_check(MPI_Bcast(s.data(), static_cast<int>(n), MPI_CHAR, root, comm), "MPI_Bcast", "a string");
  return s;
}

}  // namespace d500
