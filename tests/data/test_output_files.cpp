// The files a program writes: its outputs checked before any work (check_outputs, check_writable)
// and text written atomically (data/output_files.hpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/errors.hpp"
#include "core/serialization.hpp"
#include "data/output_files.hpp"
#include "test_support.hpp"
#include "training/checkpoint.hpp"
#include "training/model_file.hpp"
#include "training/safetensors.hpp"

using namespace loom;

TEST_CASE("output files: check_writable passes where a file can be made and writes nothing") {
    testing::TempDir dir("check_writable");
    const std::string model = (dir.path / "m.loom").string();
    CHECK_NOTHROW(check_writable(model, "--save"));
    CHECK(std::filesystem::is_empty(dir.path));
    const std::string missing = (dir.path / "no_such_folder" / "m.loom").string();
    try {
        check_writable(missing, "--save");
        FAIL("a path in a missing folder was accepted");
    } catch (const UserError& e) {
        CHECK(std::string(e.what()) == "--save " + missing + ": cannot write there: directory '" +
                                           (dir.path / "no_such_folder").string() + "' does not exist");
    }
}

namespace {

// The message of the UserError check_outputs throws, or "accepted".
std::string refusal(const std::vector<FileOption>& outputs, const std::vector<FileOption>& inputs = {}) {
    try {
        check_outputs(outputs, inputs);
    } catch (const UserError& e) {
        return e.what();
    }
    return "accepted";
}

}  // namespace

TEST_CASE("output files: check_outputs refuses inputs, twice-written paths, directories and devices, by option") {
    testing::TempDir dir("check_outputs");
    const std::string data = dir.file("d.tsv"), model = dir.file("m.loom"), plots = dir.file("plots");
    std::ofstream(data) << "q\ta\t1\n";
    CHECK(refusal({{model, "--save"}, {dir.file("g.dot"), "--graph"}, {"", "--plot"}}, {{data, "--train"}}) ==
          "accepted");
    // The training data as the model: the same file, also by another spelling of its path.
    CHECK(refusal({{data, "--save"}}, {{data, "--train"}}) ==
          "--save " + data + ": is also the input of --train " + data + "; refusing to write it");
    const std::string other_spelling = (dir.path / "." / "d.tsv").string();
    CHECK(refusal({{other_spelling, "--save"}}, {{data, "--train"}})
              .starts_with("--save " + other_spelling + ": is also the input"));
    // Two outputs on one path, existing or not; an output that is the directory of another.
    CHECK(refusal({{model, "--save"}, {model, "--graph"}}) ==
          "--graph " + model + ": is also the output of --save " + model + "; refusing to write it");
    CHECK(refusal({{model, "--save"}, {model + "/training.svg", "--plot", true}})
              .starts_with("--save " + model + ": is the directory --plot writes"));
    // What a rename would replace or cannot: a directory, a device, a FIFO.
    std::filesystem::create_directories(plots + "/training.svg");
    CHECK(refusal({{dir.path.string(), "--save"}}) ==
          "--save " + dir.path.string() + ": is a directory; refusing to write it");
    CHECK(refusal({{plots + "/training.svg", "--plot", true}})
              .starts_with("--plot " + plots + "/training.svg: is a directory"));
    CHECK(refusal({{"/dev/null", "--graph"}}) == "--graph /dev/null: is a character device; refusing to write it");
    const std::string fifo = dir.file("fifo");
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    CHECK(refusal({{fifo, "--save"}}) == "--save " + fifo + ": is a FIFO (named pipe); refusing to write it");
    // A missing directory: refused, unless the program makes it (--plot); above a file, refused.
    CHECK(refusal({{dir.file("new/m.loom"), "--save"}}).find("cannot write there") != std::string::npos);
    CHECK(refusal({{dir.file("new/deeper/a.svg"), "--plot", true}}) == "accepted");
    CHECK(refusal({{data + "/a.svg", "--plot", true}}).find("is not a directory") != std::string::npos);
    CHECK(std::filesystem::exists(data));
    CHECK(dir.names() == std::vector<std::string>{"d.tsv", "fifo", "plots"});  // nothing was written
}

TEST_CASE("output files: check_outputs follows symbolic links to the inputs and outputs they stand for") {
    testing::TempDir dir("check_outputs_links");
    namespace fs = std::filesystem;
    const std::string data = dir.file("d.tsv");
    std::ofstream(data) << "q\ta\t1\n";
    fs::create_directory(dir.path / "real");
    fs::create_symlink(data, dir.path / "link.tsv");
    fs::create_directory_symlink(dir.path / "real", dir.path / "alias");
    // A link to the training data as the model: writing it would replace the link, but a user who
    // made it meant the data file; refused as that file.
    CHECK(refusal({{dir.file("link.tsv"), "--save"}}, {{data, "--train"}})
              .starts_with("--save " + dir.file("link.tsv") + ": is also the input of --train " + data));
    // The data read through a linked directory, written by its real path (neither output exists yet
    // for the second pair): one file.
    fs::copy_file(data, dir.path / "real" / "e.tsv");
    CHECK(refusal({{dir.file("real/e.tsv"), "--save"}}, {{dir.file("alias/e.tsv"), "--train"}})
              .starts_with("--save " + dir.file("real/e.tsv") + ": is also the input of --train"));
    CHECK(refusal({{dir.file("real/m.loom"), "--save"}, {dir.file("alias/m.loom"), "--graph"}})
              .starts_with("--graph " + dir.file("alias/m.loom") + ": is also the output of --save"));
    // A link to a file that is no input of the run is an ordinary output (the atomic write replaces
    // the link, never its target).
    fs::create_symlink(dir.path / "real" / "e.tsv", dir.path / "other.loom");
    CHECK(refusal({{dir.file("other.loom"), "--save"}}, {{data, "--train"}}) == "accepted");
}

TEST_CASE("output files: a name the file system refuses is refused before any work, by option") {
    testing::TempDir dir("check_outputs_names");
    // A regular file whose directory takes no new file, whoever runs this (root too): /proc.
    const std::string proc = refusal({{"/proc/version", "--save"}});
    CHECK(proc.starts_with("--save /proc/version: cannot write there: "));
    CHECK(proc.find("'/proc'") != std::string::npos);
    // A file name of 256 bytes: every Linux file system takes at most 255.
    const std::string long_name = dir.file(std::string(256, 'm'));
    const std::string too_long = refusal({{long_name, "--save"}});
    CHECK(too_long.starts_with("--save " + long_name + ": cannot write there: "));
    CHECK(too_long.find("256 bytes") != std::string::npos);
    CHECK(too_long.find("at most 255") != std::string::npos);
    CHECK(refusal({{dir.file(std::string(256, 'd') + "/a.svg"), "--plot", true}}).find("256 bytes") !=
          std::string::npos);
    // 255 bytes is a legal name, but the atomic write's temporary beside it is longer: refused too,
    // as that write would fail after the work.
    CHECK(refusal({{dir.file(std::string(255, 'n')), "--save"}}).find("cannot write there") != std::string::npos);
    const std::string fits = dir.file(std::string(200, 'f'));
    CHECK(refusal({{fits, "--save"}}) == "accepted");
    CHECK_NOTHROW(write_text_atomically(fits, "x"));
    std::filesystem::remove(fits);
    CHECK(std::filesystem::is_empty(dir.path));  // the checks leave nothing behind
}

TEST_CASE("output files: a file the program names itself is never replaced, only one the user named") {
    testing::TempDir dir("check_outputs_named");
    const std::string mine = dir.file("alignment_1.svg");
    std::ofstream(mine) << "the user's own picture";
    CHECK(refusal({{mine, "--plot", true, true}}) ==
          "--plot " + mine +
              ": exists, and --plot names its files itself; refusing to replace it (move it away or choose "
              "another directory)");
    CHECK(refusal({{dir.file("alignment_2.svg"), "--plot", true, true}}) == "accepted");
    CHECK(refusal({{mine, "--save"}}) == "accepted");  // named by the user: replaced as asked
}

namespace {

// refusal() as seen by the unprivileged user nobody (uid and gid 65534), from a child process that
// drops root's privileges; nullopt when it cannot (no CAP_SETUID).
std::optional<std::string> refusal_as_nobody(const std::vector<FileOption>& outputs) {
    int pipe_fds[2];
    if (::pipe(pipe_fds) != 0) return std::nullopt;
    const pid_t child = ::fork();
    if (child == 0) {
        ::close(pipe_fds[0]);
        if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(2);
        const std::string answer = refusal(outputs);
        const bool written = ::write(pipe_fds[1], answer.data(), answer.size()) == static_cast<ssize_t>(answer.size());
        ::_exit(written ? 0 : 3);
    }
    ::close(pipe_fds[1]);
    std::string answer;
    char buffer[512];
    for (ssize_t n; (n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0;) answer.append(buffer, std::size_t(n));
    ::close(pipe_fds[0]);
    int status = 0;
    if (child < 0 || ::waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return std::nullopt;
    return answer;
}

}  // namespace

TEST_CASE("output files: an output in a directory this process may not write to is refused, as root too") {
    testing::TempDir dir("check_outputs_locked");
    namespace fs = std::filesystem;
    const std::string locked = dir.file("locked");
    fs::create_directory(locked);
    fs::permissions(locked, fs::perms::owner_read | fs::perms::owner_exec);
    const std::string out = locked + "/m.loom";
    const std::string want = "--save " + out + ": cannot write there: directory '" + locked + "': Permission denied";
    if (::geteuid() != 0) {
        CHECK(refusal({{out, "--save"}}) == want);
        CHECK(refusal({{locked + "/plots/a.svg", "--plot", true}}).find("Permission denied") != std::string::npos);
    } else {
        // Root writes into any directory whatever its mode (CI may run as root): the check is run by
        // a child process that has become the user nobody, for whom the mode holds.
        CHECK(refusal({{out, "--save"}}) == "accepted");
        fs::permissions(dir.path, fs::perms::others_exec, fs::perm_options::add);
        if (const auto as_nobody = refusal_as_nobody({{out, "--save"}}))
            CHECK(*as_nobody == want);
        else
            MESSAGE("running as root without the right to become another user: the locked directory is not tried");
    }
    CHECK(fs::is_empty(locked));
    fs::permissions(locked, fs::perms::owner_all);
}

TEST_CASE("output files: write_text_atomically replaces a file whole and leaves nothing beside it") {
    testing::TempDir dir("write_text");
    const std::string chart = dir.file("curve.svg");
    auto contents = [&] {
        std::ifstream in(chart, std::ios::binary);
        std::stringstream text;
        text << in.rdbuf();
        return text.str();
    };
    const std::string first = "<svg>first</svg>\n", second = std::string("a\0b\n", 4);
    write_text_atomically(chart, first);
    CHECK(contents() == first);
    write_text_atomically(chart, second);  // shorter, with a NUL byte: written byte for byte
    CHECK(contents() == second);
    CHECK(dir.names() == std::vector<std::string>{"curve.svg"});
    CHECK_THROWS_AS(write_text_atomically(dir.file("no_such_folder/curve.svg"), first), UserError);
    CHECK(dir.names() == std::vector<std::string>{"curve.svg"});
}

TEST_CASE("output files: every writer of the library refuses a FIFO, a socket or a directory by path, before writing") {
    testing::TempDir dir("not_regular_outputs");
    const std::string fifo = dir.file("fifo"), socket_path = dir.file("socket"), taken = dir.file("taken");
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    const testing::BoundSocket socket_held(socket_path);
    std::filesystem::create_directory(taken);
    Parameter w = parameter(xt::xarray<float>{1, 2, 3}, "w");
    const std::vector<std::pair<std::string, std::function<void(const std::string&)>>> writers = {
        {"write_text_atomically", [](const std::string& path) { write_text_atomically(path, "text"); }},
        {"write_checked_file", [](const std::string& path) { write_checked_file(path, "payload"); }},
        {"save_model_file", [&](const std::string& path) { save_model_file(path, "m", {w}); }},
        {"save_checkpoint", [&](const std::string& path) { save_checkpoint(path, {w}, nullptr); }},
        {"save_safetensors", [&](const std::string& path) { save_safetensors(path, {w}); }},
    };
    for (const auto& writer : writers) {  // no structured bindings: clang 14 cannot capture them (CAPTURE)
        CAPTURE(writer.first);
        for (const auto& target : {std::pair{fifo, "is a FIFO"}, std::pair{socket_path, "is a socket"},
                                   std::pair{taken, "is a directory"}}) {
            CHECK_THROWS_WITH_AS(writer.second(target.first),
                                 doctest::Contains(("'" + target.first + "' " + target.second).c_str()), UserError);
        }
        CHECK(std::filesystem::is_fifo(fifo));
        CHECK(std::filesystem::is_socket(socket_path));
        CHECK(std::filesystem::is_directory(taken));
        CHECK(dir.names() == std::vector<std::string>{"fifo", "socket", "taken"});  // no temporary either
    }
}
