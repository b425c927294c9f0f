// What the link between processes gives here: the time of MPI_Allreduce (sum of floats) for a few
// sizes, the QA model's 16.3 MB of dense gradients among them, and the "bus bandwidth" of a ring
// allreduce that time implies, 2 (P - 1) / P * bytes / time (docs/distributed.md fits its model to
// it). Run under mpirun; rank 0 prints one JSON line per size.
//
//   mpirun -np P allreduce_bench [--repeats 20] [--sizes 4096,1048576,16342400,40000000]
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
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
        std::vector<float> buffer(bytes / sizeof(float), 1.0f), incoming(buffer.size());
        const int count = static_cast<int>(buffer.size()), size = mpi.size(), rank = mpi.rank();
        // Part r of the buffer: the share of the elements process r owns in a sharded update.
        auto part = [&](int r) { return std::size_t(count) * std::size_t(r) / std::size_t(size); };
        // The ways a step can sum gradients: blocking and nonblocking allreduce (a replicated update),
        // and the sharded update's exchange: every part to its owner, added there, sent back.
        const std::vector<std::pair<const char*, std::function<void()>>> ways = {
            {"allreduce",
             [&] { MPI_Allreduce(MPI_IN_PLACE, buffer.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); }},
            {"iallreduce",
             [&] {
                 MPI_Request request = MPI_REQUEST_NULL;
                 MPI_Iallreduce(MPI_IN_PLACE, buffer.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &request);
                 MPI_Wait(&request, MPI_STATUS_IGNORE);
             }},
            {"to_owner_and_back",
             [&] {
                 std::vector<MPI_Request> requests;
                 auto exchange = [&](bool to_owner) {
                     requests.clear();
                     for (int r = 0; r < size; ++r) {
                         if (r == rank) continue;
                         const std::size_t lo = part(to_owner ? r : rank), hi = part((to_owner ? r : rank) + 1);
                         const std::size_t in_lo = part(to_owner ? rank : r), in_hi = part((to_owner ? rank : r) + 1);
                         requests.resize(requests.size() + 2);
                         MPI_Isend(buffer.data() + lo, int(hi - lo), MPI_FLOAT, r, 0, MPI_COMM_WORLD,
                                   &requests[requests.size() - 2]);
                         float* into = to_owner ? incoming.data() + in_lo : buffer.data() + in_lo;
                         MPI_Irecv(into, int(in_hi - in_lo), MPI_FLOAT, r, 0, MPI_COMM_WORLD, &requests.back());
                     }
                     MPI_Waitall(int(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
                 };
                 exchange(true);  // (two processes: one part in from the other, added)
                 for (std::size_t k = part(rank); k < part(rank + 1); ++k) buffer[k] += incoming[k];
                 exchange(false);
             }},
        };
        for (const auto& [name, run] : ways) {
            std::vector<double> ms;
            for (int k = 0; k < repeats + 3; ++k) {
                MPI_Barrier(MPI_COMM_WORLD);
                const auto t0 = std::chrono::steady_clock::now();
                run();
                const double t =
                    std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
                if (k >= 3) ms.push_back(t);
            }
            const double median = loom::bench::median(ms), p = size;
            if (mpi.is_root())
                std::printf(
                    "{\"bench\": \"%s\", \"ranks\": %d, \"bytes\": %zu, \"ms_median\": %.4f, \"ms_min\": %.4f, "
                    "\"bus_gb_per_s\": %.3f}\n",
                    name, size, bytes, median, *std::min_element(ms.begin(), ms.end()),
                    2 * (p - 1) / p * double(bytes) / (median * 1e-3) / 1e9);
        }
    }
    return 0;
}
