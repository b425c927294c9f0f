// What the link between processes gives here: the time of MPI_Allreduce (sum of floats) for a few
// sizes, the QA model's 16.3 MB of dense gradients among them, and the "bus bandwidth" of a ring
// allreduce that time implies, 2 (P - 1) / P * bytes / time (docs/distributed.md fits its model to
// it). Run under mpirun; rank 0 prints one JSON line per size.
//
//   mpirun -np P allreduce_bench [--repeats 20] [--sizes 4096,1048576,16342400,40000000]
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench_common.hpp"
#include "distributed/context.hpp"

int main(int argc, char** argv) {
    loom::distributed::Context mpi(argc, argv);
    int repeats = 20;
    std::string sizes = "4096,1048576,16342400,40000000";
    CLI::App app{"MPI_Allreduce time and bus bandwidth per message size (bytes); run under mpirun"};
    app.add_option("--repeats", repeats, "timed allreduces per size (after 3 untimed)")->check(CLI::PositiveNumber);
    app.add_option("--sizes", sizes, "comma-separated message sizes in bytes")->capture_default_str();
    CLI11_PARSE(app, argc, argv);
    std::stringstream list(sizes);
    std::string item;
    while (std::getline(list, item, ',')) {
        const std::size_t bytes = std::stoul(item);
        std::vector<float> buffer(bytes / sizeof(float), 1.0f);
        const int count = static_cast<int>(buffer.size());
        std::vector<double> ms;
        for (int k = 0; k < repeats + 3; ++k) {
            MPI_Barrier(MPI_COMM_WORLD);
            const auto t0 = std::chrono::steady_clock::now();
            MPI_Allreduce(MPI_IN_PLACE, buffer.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            if (k >= 3) ms.push_back(t);
        }
        const double median = loom::bench::median(ms), p = mpi.size();
        if (mpi.is_root())
            std::printf(
                "{\"bench\": \"allreduce\", \"ranks\": %d, \"bytes\": %zu, \"ms_median\": %.4f, "
                "\"bus_gb_per_s\": %.3f}\n",
                mpi.size(), bytes, median, 2 * (p - 1) / p * double(bytes) / (median * 1e-3) / 1e9);
    }
    return 0;
}
