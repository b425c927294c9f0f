// doctest's main for the MPI tests: every process runs every test case in the same order (each is a
// collective scenario), inside one loom::distributed::Context. Run through mpirun (CMakeLists.txt).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <loom.hpp>

#include "distributed/context.hpp"

int main(int argc, char** argv) {
    loom::distributed::Context mpi(argc, argv);
    loom::set_blas_threads(1);
    doctest::Context context(argc, argv);
    // Only rank 0 reports passes; every rank reports its failures.
    if (!mpi.is_root()) context.setOption("minimal", true);
    return context.run();
}
