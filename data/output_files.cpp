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

// Linux's NAME_MAX: no file system of it takes a longer name (the limit is in bytes, not characters).
constexpr std::size_t longest_name = 255;

void check_directory(const std::string& path, const std::string& what, bool may_create) {
    auto refuse = [&](const std::string& why) { throw UserError(what + " " + path + ": cannot write there: " + why); };
    for (const fs::path& part : lexical(path))
        if (const std::size_t n = part.native().size(); n > longest_name)
            refuse("the name " + quoted_field(part.native()) + " is " + std::to_string(n) +
                   " bytes long; a file or directory name holds at most " + std::to_string(longest_name) + " bytes");
    const fs::path parent = lexical(path).parent_path();
    fs::path dir = parent;
    std::error_code ec;
    while (may_create && !fs::exists(dir, ec) && dir.has_relative_path()) dir = dir.parent_path();
    const auto status = fs::status(dir, ec);
    if (!fs::exists(status)) refuse("directory '" + dir.string() + "' does not exist");
    if (!fs::is_directory(status)) refuse("'" + dir.string() + "' is not a directory");
    if (::access(dir.c_str(), W_OK | X_OK) != 0) refuse("directory '" + dir.string() + "': " + std::strerror(errno));
    // The permission bits can say yes where the file system says no (/proc, a read-only
    // mount): what decides is a file actually made, as the atomic write will make it.
    try {
        try_temporary_beside(dir == parent ? lexical(path).string() : (dir / "probe").string());
    } catch (const UserError& e) {
        refuse(e.what());
    }
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
        if (const std::string kind = not_replaceable(out.path); !kind.empty()) refuse(kind);
        std::error_code ec;
        if (out.named_by_program && fs::exists(fs::symlink_status(out.path, ec)))
            throw UserError(out.option + " " + out.path + ": exists, and " + out.option +
                            " names its files itself; refusing to replace it (move it away or choose another "
                            "directory)");
        check_directory(out.path, out.option, out.creates_directory);
    }
}

}  // namespace loom
