#pragma once
// Small helpers the test files share: scratch directories, whole-file reads and writes, the check
// that a call throws a loom::UserError whose message says what it must, a node's plan index, and the
// real data beside the checkout (a test case without it is skipped, never passed).
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/errors.hpp"
#include "graph/compile.hpp"
#include "graph/variable.hpp"

namespace loom::testing {

// The process's peak resident set so far, KiB.
inline long peak_rss_kib() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss;
}

// Checks that the peak resident set grew by less than `limit_kib` since `before` (peak_rss_kib());
// not compared under ASan, whose quarantine keeps freed memory, so the peak grows with the work.
inline void check_peak_growth(long before, long limit_kib, const std::string& what) {
    const long grown = peak_rss_kib() - before;
#if defined(__SANITIZE_ADDRESS__)
    MESSAGE("the peak resident set grew by " << grown << " KiB; not compared under ASan (its quarantine)");
    (void)limit_kib, (void)what;
#else
    INFO("the peak resident set grew by " << grown << " KiB, at most " << limit_kib << " KiB (" << what << ")");
    CHECK(grown < limit_kib);
#endif
}

// A path in the temp directory for `name`, unique per process: two runs of the suite at once (CTest
// with -j, two checkouts) never share a file.
inline std::filesystem::path temp_path(const std::string& name) {
    return std::filesystem::temp_directory_path() / ("loom_test_" + std::to_string(::getpid()) + "_" + name);
}

// A file there holding `text`, removed at the end of the test.
struct TempFile {
    std::filesystem::path path;
    TempFile(const std::string& name, const std::string& text) : path(temp_path(name)) {
        std::ofstream(path, std::ios::binary) << text;
    }
    ~TempFile() { std::filesystem::remove(path); }
    TempFile(const TempFile&) = delete;
    TempFile& operator=(const TempFile&) = delete;
};

// A Unix socket bound at `path` (a path that is neither a file, a FIFO nor a device), closed at the
// end of the test.
struct BoundSocket {
    int fd = -1;
    explicit BoundSocket(const std::string& path) : fd(::socket(AF_UNIX, SOCK_STREAM, 0)) {
        REQUIRE(fd >= 0);
        sockaddr_un address{};
        address.sun_family = AF_UNIX;
        REQUIRE(path.size() < sizeof address.sun_path);
        std::copy(path.begin(), path.end(), address.sun_path);
        REQUIRE(::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
    }
    ~BoundSocket() { ::close(fd); }
    BoundSocket(const BoundSocket&) = delete;
    BoundSocket& operator=(const BoundSocket&) = delete;
};

// A scratch directory, unique per process and name, removed at the end of the test.
struct TempDir {
    std::filesystem::path path;
    explicit TempDir(const std::string& name)
        : path(std::filesystem::temp_directory_path() / ("loom_" + name + "_" + std::to_string(::getpid()))) {
        std::filesystem::remove_all(path);
        std::filesystem::create_directories(path);
    }
    ~TempDir() { std::filesystem::remove_all(path); }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    std::string file(const std::string& name) const { return (path / name).string(); }
    // Its entries, sorted by name.
    std::vector<std::string> names() const {
        std::vector<std::string> out;
        for (const auto& e : std::filesystem::directory_iterator(path)) out.push_back(e.path().filename().string());
        std::sort(out.begin(), out.end());
        return out;
    }
};

inline std::string read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << bytes;
}

// `f` must throw a UserError whose message contains every one of `needles`.
inline void expect_user_error(const std::function<void()>& f, const std::vector<std::string>& needles) {
    try {
        f();
        FAIL("expected a UserError");
    } catch (const UserError& e) {
        const std::string message = e.what();
        for (const auto& needle : needles) {
            INFO("message: " << message << "; expected to contain: " << needle);
            CHECK(message.find(needle) != std::string::npos);
        }
    }
}

// The index of v's node in `plan`; the test fails when the plan does not hold it.
inline int node_of(const Plan& plan, const Variable& v) {
    const int i = plan.find(v.node().get());
    REQUIRE(i >= 0);
    return i;
}

// How many times `what` occurs in `text`, overlapping occurrences included.
inline std::size_t occurrences(const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (auto pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
    return n;
}

// The exit code of a run in which every test case that matched was skipped for missing real data:
// CTest reports such a test as skipped (SKIP_RETURN_CODE, tests/CMakeLists.txt).
inline constexpr int skip_return_code = 77;

// The real data beside the checkout, ../shared/data/<relative> (README: where it comes from), when it
// is there. Otherwise the running test case is recorded as skipped with the path it looked for
// (tests/main.cpp prints it and sets the exit code) and nullopt comes back: the test case returns.
std::optional<std::filesystem::path> real_data(const std::string& relative);

}  // namespace loom::testing
