// The `mpi` backend: the MPI library's collectives (the collective workloads in
// workloads/level0/collectives.cpp call MPI directly; this names the library and its version).
#include <mpi.h>

#include "backends/registry.hpp"

namespace d500 {

namespace {

std::string mpi_library_version() {
  char buf[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  if (MPI_Get_library_version(buf, &len) != MPI_SUCCESS) return "unknown (MPI_Get_library_version failed)";
  std::string s(buf, static_cast<size_t>(len));
  auto nl = s.find_first_of("\n,");
  return nl == std::string::npos ? s : s.substr(0, nl);
}

}  // namespace

void register_backend_mpi(BackendRegistry& r) {
  r.add({.name = "mpi", .description = "MPI collectives", .host_collectives = true, .version = mpi_library_version});
}

}  // namespace d500
