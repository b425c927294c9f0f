#include "data/output_files.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <system_error>

#include <unistd.h>

#include "core/errors.hpp"
#include "core/serialization.hpp"

namespace loom {

void write_text_atomically(const std::string& path, const std::string& text) { write_file_atomically(path, {text}); }

namespace {

namespace fs = std::filesystem;

// The absolute path, lexically normalized: where a file of this name is created (a symbolic link
// is replaced, not followed, by the rename of an atomic write).
fs::path lexical(const std::string& path) {
    std::error_code ec;
    const fs::path absolute = fs::absolute(path, ec);
    return (ec ? fs::path(path) : absolute).lexically_normal();
}

// The same with every symbolic link in its existing part resolved (std::filesystem::weakly_canonical):
// two spellings of one file, through a linked directory too, compare equal although the file does
// not exist yet.
fs::path normalized(const std::string& path) {
    std::error_code ec;
    const fs::path resolved = fs::weakly_canonical(lexical(path), ec);
    return ec ? lexical(path) : resolved.lexically_normal();
}

bool same_file(const std::string& a, const std::string& b) {
    std::error_code ec;
    if (fs::exists(a, ec) && fs::exists(b, ec)) return fs::equivalent(a, b, ec) && !ec;
    return normalized(a) == normalized(b);
}

// Whether `dir` is `path` itself or one of the directories above it.
bool is_within(const fs::path& path, const fs::path& dir) {
    const auto [d, p] = std::mismatch(dir.begin(), dir.end(), path.begin(), path.end());
    return d == dir.end() || (std::next(d) == dir.end() && d->empty());  // "dir/" ends in an empty element
}

// What kind of file `status` is, when it is one no output may replace; empty otherwise.
std::string not_replaceable(fs::file_status status) {
    switch (status.type()) {
        case fs::file_type::directory:
            return "is a directory";
        case fs::file_type::character:
        case fs::file_type::block:
            return "is a device";
        case fs::file_type::fifo:
            return "is a FIFO";
        case fs::file_type::socket:
            return "is a socket";
        default:
            return "";
    }
}

void check_directory(const std::string& path, const std::string& what, bool may_create) {
    fs::path dir = lexical(path).parent_path();
    std::error_code ec;
    while (may_create && !fs::exists(dir, ec) && dir.has_relative_path()) dir = dir.parent_path();
    const auto status = fs::status(dir, ec);
    std::string why;
    if (!fs::exists(status))
        why = "directory '" + dir.string() + "' does not exist";
    else if (!fs::is_directory(status))
        why = "'" + dir.string() + "' is not a directory";
    else if (::access(dir.c_str(), W_OK | X_OK) != 0)
        why = "directory '" + dir.string() + "': " + std::strerror(errno);
    if (!why.empty()) throw UserError(what + " " + path + ": cannot write there: " + why);
}

}  // namespace

void check_writable(const std::string& path, const std::string& what) { check_directory(path, what, false); }

void check_outputs(const std::vector<FileOption>& outputs, const std::vector<FileOption>& inputs) {
    for (std::size_t i = 0; i < outputs.size(); ++i) {
        const FileOption& out = outputs[i];
        if (out.path.empty()) continue;
        auto refuse = [&](const std::string& why) {
            throw UserError(out.option + " " + out.path + ": " + why + "; refusing to write it");
        };
        for (const FileOption& in : inputs)
            if (!in.path.empty() && same_file(out.path, in.path))
                refuse("is also the input of " + in.option + " " + in.path);
        for (std::size_t j = 0; j < outputs.size(); ++j) {
            const FileOption& other = outputs[j];
            if (j == i || other.path.empty()) continue;
            if (j < i && same_file(out.path, other.path))
                refuse("is also the output of " + other.option + " " + other.path);
            if (normalized(other.path) != normalized(out.path) &&
                is_within(normalized(other.path), normalized(out.path)))
                refuse("is the directory " + other.option + " writes " + other.path + " into");
        }
        std::error_code ec;
        if (const std::string kind = not_replaceable(fs::status(out.path, ec)); !kind.empty()) refuse(kind);
        check_directory(out.path, out.option, out.creates_directory);
    }
}

}  // namespace loom
