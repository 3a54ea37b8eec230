// GoogleTest main for suites that touch MPI: initialises MPI once (a singleton run without
// mpirun gives a one-rank MPI_COMM_WORLD) and finalises it after every test has run.
#include <gtest/gtest.h>
#include <mpi.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  int rc = RUN_ALL_TESTS();
  MPI_Finalize();
  return rc;
}
