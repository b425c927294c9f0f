// Checked files and their records: every count and size read from a file is checked before use,
// damaged files are named with what is wrong, and the temporary files of writers that were
// killed before their rename are removed by the next save to the same path.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>
#include <vector>

#include <csignal>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/errors.hpp"
#include "core/serialization.hpp"
#include "test_support.hpp"
#include "text/vocabulary.hpp"

using namespace loom;
using loom::testing::BoundSocket;
using loom::testing::TempDir;
using loom::testing::write_bytes;
namespace fs = std::filesystem;

namespace {

std::string record_with_u64s(std::initializer_list<std::uint64_t> values) {
    ByteWriter w;
    for (auto v : values) w.u64(v);
    return w.bytes();
}

}  // namespace

TEST_CASE("serialization: an empty float array reads back empty and the next record follows") {
    // This read was undefined behaviour (memcpy from a null vector's data) and stopped the first
    // fuzzer within 50 inputs.
    ByteWriter w;
    w.floats({});
    w.u64(42);
    const float values[] = {1.5f, -2.0f};
    w.floats(values);
    ByteReader r(w.bytes(), "mem");
    CHECK(r.floats().empty());
    CHECK(r.u64() == 42);
    CHECK(r.floats() == std::vector<float>{1.5f, -2.0f});
    CHECK(r.done());
}

TEST_CASE("serialization: counts and sizes beyond the record are DataErrors that say so") {
    const std::string too_many_floats = record_with_u64s({3}) + std::string(8, '\0');  // 3 floats need 12 bytes
    ByteReader floats(too_many_floats, "mem.bin");
    CHECK_THROWS_WITH_AS(floats.floats(), doctest::Contains("mem.bin: an array of 3 floats at offset 0"), DataError);

    const std::string huge_count = record_with_u64s({~0ull});
    ByteReader huge(huge_count, "mem.bin");
    CHECK_THROWS_WITH_AS(huge.floats(), doctest::Contains("longer than the 0 bytes left"), DataError);
    ByteReader huge_string(huge_count, "mem.bin");
    CHECK_THROWS_WITH_AS(huge_string.str(), doctest::Contains("record ends early"), DataError);

    const std::string five_bytes(5, 'x');
    ByteReader short_u64(five_bytes, "mem.bin");
    CHECK_THROWS_WITH_AS(short_u64.u64(), doctest::Contains("wanted 8 bytes at offset 0, 5 left"), DataError);
}

TEST_CASE("serialization: checked bytes round trip / damaged ones name what is wrong") {
    const std::string payload = "some payload";
    const std::string bytes = checked_bytes(payload);
    CHECK(bytes.size() == 32 + payload.size());  // magic, version, size, checksum: 8 bytes each
    CHECK(unpack_checked_bytes(bytes, "f") == payload);

    std::string flipped = bytes;
    flipped.back() ^= 1;
    CHECK_THROWS_WITH_AS(unpack_checked_bytes(flipped, "f"), doctest::Contains("checksum mismatch"), DataError);
    CHECK_THROWS_WITH_AS(unpack_checked_bytes(bytes + "x", "f"),
                         doctest::Contains("header says 12 payload bytes, file has 13"), DataError);
    CHECK_THROWS_WITH_AS(unpack_checked_bytes("", "f"), doctest::Contains("'f' is empty (0 bytes)"), DataError);
    CHECK_THROWS_WITH_AS(unpack_checked_bytes("LOOMFIL", "f"), doctest::Contains("not a loom file"), DataError);
    std::string version = bytes;
    version[8] = 2;
    CHECK_THROWS_WITH_AS(unpack_checked_bytes(version, "f"), doctest::Contains("format version 2"), DataError);
}

TEST_CASE("serialization: a directory or a missing file is named as such") {
    TempDir dir("names");
    CHECK_THROWS_WITH_AS(read_checked_file(dir.path.string()), doctest::Contains("is a directory"), DataError);
    CHECK_THROWS_WITH_AS(read_checked_file(dir.file("missing")), doctest::Contains("No such file"), DataError);
}

TEST_CASE("serialization: a FIFO or a device is refused by name, and the size is checked before the payload is read") {
    TempDir dir("not_regular");
    const std::string fifo = dir.file("fifo");
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    // Opening the FIFO would block until a writer came (checkpoints share this reader).
    CHECK_THROWS_WITH_AS(read_checked_file(fifo),
                         doctest::Contains(("'" + fifo + "' is a FIFO (named pipe), not a regular file").c_str()),
                         DataError);
    CHECK_THROWS_WITH_AS(read_checked_file("/dev/zero"),
                         doctest::Contains("'/dev/zero' is a character device, not a regular file"), DataError);
    // A header claiming more than the file has: named from the header and the file's size.
    const std::string path = dir.file("f");
    write_checked_file(path, "payload");
    std::ofstream(path, std::ios::binary | std::ios::app) << "padding";
    CHECK_THROWS_WITH_AS(read_checked_file(path), doctest::Contains("header says 7 payload bytes, file has 14"),
                         DataError);
    write_bytes(path, "short");
    CHECK_THROWS_WITH_AS(read_checked_file(path), doctest::Contains("not a loom file"), DataError);
}

TEST_CASE("serialization: one classifier names a path alike for readers and writers") {
    TempDir dir("kinds");
    const std::string fifo = dir.file("fifo"), socket_path = dir.file("socket"), file = dir.file("file");
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    const BoundSocket socket_held(socket_path);
    write_bytes(file, "bytes");
    std::filesystem::create_symlink(fifo, dir.file("to_fifo"));
    std::filesystem::create_symlink(dir.file("nowhere"), dir.file("dangling"));
    const std::vector<std::tuple<std::string, PathKind, std::string>> cases = {
        {file, PathKind::regular, ""},
        {dir.path.string(), PathKind::directory, "a directory"},
        {fifo, PathKind::fifo, "a FIFO (named pipe)"},
        {dir.file("to_fifo"), PathKind::fifo, "a FIFO (named pipe)"},  // a link judged by what it leads to
        {"/dev/null", PathKind::character_device, "a character device"},
        {socket_path, PathKind::socket, "a socket"},
        {dir.file("missing"), PathKind::missing, ""},
        {dir.file("dangling"), PathKind::missing, ""},
    };
    for (const auto& c : cases) {
        const std::string& path = std::get<0>(c);
        const std::string& name = std::get<2>(c);
        CAPTURE(path);
        CHECK(path_kind(path) == std::get<1>(c));
        CHECK(path_kind_name(path_kind(path)) == name);
        // The writers' refusal and the readers' use the same words.
        CHECK(not_replaceable(path) == (name.empty() ? "" : "is " + name));
        if (std::get<1>(c) == PathKind::regular)
            CHECK(require_regular_file(path, "hint") == 5);
        else if (std::get<1>(c) == PathKind::missing)
            CHECK_THROWS_WITH_AS(require_regular_file(path, "hint"), doctest::Contains("No such file"), DataError);
        else if (std::get<1>(c) == PathKind::directory)
            CHECK_THROWS_WITH_AS(require_regular_file(path, "hint"), ("'" + path + "' is a directory; hint").c_str(),
                                 DataError);
        else
            CHECK_THROWS_WITH_AS(require_regular_file(path, "hint"),
                                 ("'" + path + "' is " + name + ", not a regular file; hint").c_str(), DataError);
    }
}

TEST_CASE("serialization: fields from a file are quoted short and without control bytes") {
    CHECK(quoted_field("w1") == "'w1'");
    CHECK(quoted_field(std::string("a\nb\0", 4)) == "'a\\x0ab\\x00'");
    CHECK(quoted_field("caf\xC3\xA9") == "'caf\xC3\xA9'");  // valid UTF-8 is shown as is
    CHECK(quoted_field("caf\xE9!") == "'caf\\xe9!'");       // a Latin-1 byte is not
    const std::string shown = quoted_field(std::string(1000, 'n'));
    CHECK(shown == "'" + std::string(60, 'n') + "...' (1000 bytes)");
}

TEST_CASE("serialization: a save removes the temporaries of killed writers and keeps a live one's") {
    TempDir dir("temporaries");
    const std::string path = dir.file("model.ckpt");
    const std::string held = path + ".loom-tmp.1.0";
    // A writer in the middle of its save: it holds the lock on its temporary, as
    // write_file_atomically does, until it is killed. Only system calls after fork().
    int ready[2];
    REQUIRE(::pipe(ready) == 0);
    const pid_t writer = ::fork();
    REQUIRE(writer >= 0);
    if (writer == 0) {
        const int fd = ::open(held.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
        if (fd < 0 || ::flock(fd, LOCK_EX) != 0 || ::write(fd, "partial", 7) != 7) ::_exit(1);
        if (::write(ready[1], "x", 1) != 1) ::_exit(1);
        for (;;) ::pause();
    }
    char byte = 0;
    REQUIRE(::read(ready[0], &byte, 1) == 1);
    ::close(ready[0]);
    ::close(ready[1]);

    // What dead writers left (no lock on them), the old fixed name, and files to leave alone.
    for (const std::string name : {"model.ckpt.loom-tmp.77.0", "model.ckpt.loom-tmp.77.5", "model.ckpt.tmp",
                                   "other.ckpt.loom-tmp.77.0", "model.ckpt.notes"})
        write_bytes(dir.file(name), "partial");
    fs::create_directory(dir.file("model.ckpt.loom-tmp.dir"));

    write_checked_file(path, "first");
    CHECK(dir.names() == std::vector<std::string>{"model.ckpt", "model.ckpt.loom-tmp.1.0", "model.ckpt.loom-tmp.dir",
                                                  "model.ckpt.notes", "other.ckpt.loom-tmp.77.0"});

    ::kill(writer, SIGKILL);
    int status = 0;
    REQUIRE(::waitpid(writer, &status, 0) == writer);
    write_checked_file(path, "second");
    CHECK_FALSE(fs::exists(held));
    CHECK(read_checked_file(path) == "second");

    // Text files saved through the same writer (a vocabulary) clean up the same way.
    const std::string vocab = dir.file("words.vocab");
    write_bytes(vocab + ".loom-tmp.77.3", "partial");
    Vocabulary().save(vocab);
    CHECK_FALSE(fs::exists(vocab + ".loom-tmp.77.3"));
    CHECK(Vocabulary::load(vocab).size() == 2);
}

TEST_CASE("serialization: saves in a loop that is killed leave at most one temporary, which the next save removes") {
    TempDir dir("killed");
    const std::string path = dir.file("big.ckpt");
    const std::string payload(8 << 20, 'p');
    int killed_with_temporary = 0;
    for (int round = 0; round < 5; ++round) {
        const pid_t saver = ::fork();
        REQUIRE(saver >= 0);
        if (saver == 0) {
            // Should the child block (on a lock another thread of the test held at fork), it is
            // killed all the same.
            for (;;) write_checked_file(path, payload);
        }
        ::usleep(static_cast<useconds_t>(20000 + 7000 * round));
        ::kill(saver, SIGKILL);
        int status = 0;
        REQUIRE(::waitpid(saver, &status, 0) == saver);
        const auto names = dir.names();
        CHECK(names.size() <= 2);
        killed_with_temporary += names.size() == 2 ? 1 : 0;
        // Whole: the killed child's last complete save, or the previous round's.
        if (fs::exists(path)) {
            const std::string content = read_checked_file(path);
            CHECK((content == payload || (round > 0 && content == "done")));
        }
        write_checked_file(path, "done");
        CHECK(dir.names() == std::vector<std::string>{"big.ckpt"});
    }
    MESSAGE("killed during a save with its temporary on disk: " << killed_with_temporary << " of 5");
}

TEST_CASE("serialization: a failed save names the file and leaves the old one") {
    TempDir dir("failed");
    const std::string path = dir.file("model.ckpt");
    write_checked_file(path, "old");
    // A directory in the way of the rename.
    const std::string blocked = dir.file("blocked");
    fs::create_directories(fs::path(blocked) / "inside");
    CHECK_THROWS_WITH_AS(write_checked_file(blocked, "new"), doctest::Contains("is a directory"), UserError);
    CHECK(read_checked_file(path) == "old");
    CHECK(dir.names() == std::vector<std::string>{"blocked", "model.ckpt"});
    CHECK_THROWS_WITH_AS(write_checked_file(dir.file("no/such/dir/f"), "x"), doctest::Contains("cannot write"),
                         UserError);
    // A write that fails half-way (a file size limit standing in for a full disk) takes its
    // temporary with it.
    std::signal(SIGXFSZ, SIG_IGN);
    rlimit old_limit{};
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &old_limit) == 0);
    rlimit small = old_limit;
    small.rlim_cur = 64;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
    CHECK_THROWS_WITH_AS(write_checked_file(path, std::string(1000, 'x')), doctest::Contains("cannot write"),
                         UserError);
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &old_limit) == 0);
    CHECK(read_checked_file(path) == "old");
    CHECK(dir.names() == std::vector<std::string>{"blocked", "model.ckpt"});
}
