#include "core/serialization.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/errors.hpp"
#include "core/utf8.hpp"

namespace loom {

namespace {
constexpr char magic[8] = {'L', 'O', 'O', 'M', 'F', 'I', 'L', 'E'};
constexpr std::uint64_t format_version = 1;
constexpr std::size_t header_size = sizeof(magic) + 3 * sizeof(std::uint64_t);
constexpr std::string_view temporary_marker = ".loom-tmp.";

void put_u64(std::string& s, std::uint64_t v) { s.append(reinterpret_cast<const char*>(&v), sizeof v); }
std::uint64_t get_u64(const char* p) {
    std::uint64_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

// Temporaries next to `path` whose writers are gone. A writer holds an flock on its temporary
// until the rename, and the kernel drops the lock when the process dies, however it dies; so a
// temporary that can be locked has no writer and is removed (while locked, see open_temporary).
// The plain `<path>.tmp` of earlier loom versions is removed too. Cleaning up is best effort
// and never makes the save itself fail.
void remove_stale_temporaries(const std::string& path) {
    namespace fs = std::filesystem;
    const fs::path target(path);
    const std::string file = target.filename().string();
    if (file.empty()) return;
    std::error_code ec;
    if (fs::is_regular_file(fs::symlink_status(path + ".tmp", ec))) fs::remove(path + ".tmp", ec);
    const std::string prefix = file + std::string(temporary_marker);
    const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (!name.starts_with(prefix)) continue;
        const int fd = ::open(it->path().c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        if (fd < 0) continue;
        struct stat st = {};
        if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ::flock(fd, LOCK_EX | LOCK_NB) == 0)
            ::unlink(it->path().c_str());
        ::close(fd);
    }
}

// Creates and locks a fresh temporary for `path`. A cleaner may lock and unlink the new file in
// the moment before this writer's lock is taken; then the name no longer leads to this file, and
// another name is tried.
int open_temporary(const std::string& path, std::string& tmp) {
    static std::atomic<std::uint64_t> serial{0};
    for (int attempt = 0;; ++attempt) {
        tmp = path + std::string(temporary_marker) + std::to_string(::getpid()) + "." + std::to_string(serial++);
        const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0) {
            if (errno == EEXIST && attempt < 100) continue;
            throw UserError("cannot write '" + tmp + "': " + std::strerror(errno));
        }
        int locked = 0;
        while ((locked = ::flock(fd, LOCK_EX)) != 0 && errno == EINTR) {
        }
        // Without locks (a filesystem that has none) nobody can take the file either: no cleanup.
        if (locked != 0) return fd;
        struct stat mine = {}, named = {};
        if (::fstat(fd, &mine) == 0 && ::stat(tmp.c_str(), &named) == 0 && mine.st_ino == named.st_ino &&
            mine.st_dev == named.st_dev)
            return fd;
        ::close(fd);
        if (attempt >= 100) throw UserError("cannot write '" + tmp + "': it keeps disappearing");
    }
}

}  // namespace

void try_temporary_beside(const std::string& path) {
    // A serial longer than any run reaches, so a name that passes here fits open_temporary's too.
    const std::string tmp = path + std::string(temporary_marker) + std::to_string(::getpid()) + ".99999999999";
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST) return;  // the directory holds such a name already: it takes one
    if (fd < 0) {
        const std::string why = std::strerror(errno);
        const std::filesystem::path dir = std::filesystem::path(path).parent_path();
        throw UserError("cannot create a file in '" + (dir.empty() ? std::string(".") : dir.string()) + "': " + why);
    }
    ::close(fd);
    ::unlink(tmp.c_str());
}

std::uint64_t fnv1a64(const void* data, std::size_t size) {
    const auto* p = static_cast<const unsigned char*>(data);
    std::uint64_t h = 1469598103934665603ull;
    for (std::size_t i = 0; i < size; ++i) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

std::string quoted_field(std::string_view text) {
    constexpr std::size_t max_shown = 60;
    const std::string_view head = text.substr(0, max_shown);
    std::string shown;
    for (std::size_t i = 0; i < head.size();) {
        const auto byte = static_cast<unsigned char>(head[i]);
        const std::size_t length = utf8_sequence_length(head.substr(i));
        if (length == 0 || byte < 0x20 || byte == 0x7f) {
            // Control bytes and bytes outside UTF-8 would garble a terminal: shown as \xNN.
            constexpr char hex[] = "0123456789abcdef";
            shown += "\\x";
            shown += hex[byte >> 4];
            shown += hex[byte & 15];
            ++i;
        } else {
            shown += head.substr(i, length);
            i += length;
        }
    }
    return "'" + shown + (text.size() > max_shown ? "...' (" + std::to_string(text.size()) + " bytes)" : "'");
}

namespace {
PathKind kind_of(const struct stat& st) {
    if (S_ISREG(st.st_mode)) return PathKind::regular;
    if (S_ISDIR(st.st_mode)) return PathKind::directory;
    if (S_ISFIFO(st.st_mode)) return PathKind::fifo;
    if (S_ISCHR(st.st_mode)) return PathKind::character_device;
    if (S_ISBLK(st.st_mode)) return PathKind::block_device;
    if (S_ISSOCK(st.st_mode)) return PathKind::socket;
    return PathKind::other;
}
}  // namespace

PathKind path_kind(const std::string& path) {
    struct stat st = {};
    if (::stat(path.c_str(), &st) != 0) return PathKind::missing;  // nothing there, or a dangling link
    return kind_of(st);
}

std::string path_kind_name(PathKind kind) {
    switch (kind) {
        case PathKind::directory:
            return "a directory";
        case PathKind::fifo:
            return "a FIFO (named pipe)";
        case PathKind::character_device:
            return "a character device";
        case PathKind::block_device:
            return "a block device";
        case PathKind::socket:
            return "a socket";
        default:
            return "";
    }
}

std::uint64_t require_regular_file(const std::string& path, const std::string& hint) {
    struct stat st = {};
    if (::stat(path.c_str(), &st) != 0) throw DataError("cannot open '" + path + "': " + std::strerror(errno));
    const PathKind kind = kind_of(st);
    if (kind == PathKind::regular) return static_cast<std::uint64_t>(st.st_size);
    if (kind == PathKind::directory) throw DataError("'" + path + "' is a directory; " + hint);
    const std::string name = path_kind_name(kind);
    throw DataError("'" + path + "' is " +
                    (name.empty() ? std::string("not a regular file") : name + ", not a regular file") + "; " + hint);
}

std::string not_replaceable(const std::string& path) {
    const std::string name = path_kind_name(path_kind(path));
    return name.empty() ? "" : "is " + name;
}

void write_file_atomically(const std::string& path, std::initializer_list<std::string_view> parts) {
    if (const std::string kind = not_replaceable(path); !kind.empty())
        throw UserError("'" + path + "' " + kind + "; a save replaces only a regular file, so nothing was written");
    remove_stale_temporaries(path);
    std::string tmp;
    const int fd = open_temporary(path, tmp);
    // On every failure the temporary goes; the lock goes with the descriptor.
    auto fail = [&](const std::string& what) {
        const std::string why = std::strerror(errno);
        std::remove(tmp.c_str());
        ::close(fd);
        throw UserError("cannot " + what + " '" + tmp + "'" + (what == "rename" ? " to '" + path + "'" : "") + ": " +
                        why);
    };
    for (const std::string_view part : parts) {
        std::size_t done = 0;
        while (done < part.size()) {
            const ssize_t n = ::write(fd, part.data() + done, part.size() - done);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) fail("write");
            done += static_cast<std::size_t>(n);
        }
    }
    if (::fsync(fd) != 0) fail("flush to disk");
    // Renamed while still locked, so no cleaner takes the file for a dead writer's.
    if (std::rename(tmp.c_str(), path.c_str()) != 0) fail("rename");
    if (::close(fd) != 0) throw UserError("cannot flush '" + path + "' to disk: " + std::strerror(errno));
}

namespace {
std::string header_for(std::string_view payload) {
    std::string header(magic, sizeof magic);
    put_u64(header, format_version);
    put_u64(header, payload.size());
    put_u64(header, fnv1a64(payload.data(), payload.size()));
    return header;
}
}  // namespace

std::string checked_bytes(std::string_view payload) { return header_for(payload) + std::string(payload); }

void write_checked_file(const std::string& path, const std::string& payload) {
    write_file_atomically(path, {header_for(payload), payload});
}

namespace {
// Checks a header against the size of the whole file (`total` bytes, header included) and returns
// the payload's checksum. Run before reading the payload, so a header that claims another size
// stops the read instead of a file (or a device) being read to its end first.
std::uint64_t check_header(std::string_view header, std::uint64_t total, const std::string& path) {
    if (total == 0) throw DataError("'" + path + "' is empty (0 bytes), not a loom file");
    if (total < header_size || header.size() < header_size || std::memcmp(header.data(), magic, sizeof magic) != 0)
        throw DataError("'" + path + "' is not a loom file (bad or missing header)");
    const char* h = header.data() + sizeof magic;
    if (get_u64(h) != format_version)
        throw DataError("'" + path + "' has format version " + std::to_string(get_u64(h)) + "; this build reads " +
                        std::to_string(format_version));
    const std::uint64_t size = get_u64(h + 8);
    if (total - header_size != size)
        throw DataError("'" + path + "' is truncated or padded: header says " + std::to_string(size) +
                        " payload bytes, file has " + std::to_string(total - header_size));
    return get_u64(h + 16);
}
}  // namespace

std::string unpack_checked_bytes(const std::string& all, const std::string& path) {
    const std::uint64_t sum = check_header(all, all.size(), path);
    std::string payload = all.substr(header_size);
    if (fnv1a64(payload.data(), payload.size()) != sum)
        throw DataError("'" + path + "' is corrupted: checksum mismatch");
    return payload;
}

std::string read_checked_file(const std::string& path) {
    const std::uint64_t total = require_regular_file(path, "give the path of a file loom saved");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw DataError("cannot open '" + path + "': " + std::strerror(errno));
    std::string all(std::min<std::uint64_t>(total, header_size), '\0');
    in.read(all.data(), static_cast<std::streamsize>(all.size()));
    if (in.gcount() != static_cast<std::streamsize>(all.size())) throw DataError("error while reading '" + path + "'");
    check_header(all, total, path);
    all.resize(total);
    in.read(all.data() + header_size, static_cast<std::streamsize>(total - header_size));
    // A file that shrank while being read ends early; one that grew has bytes left.
    if (in.gcount() != static_cast<std::streamsize>(total - header_size) || in.peek() != std::char_traits<char>::eof())
        throw DataError("'" + path + "' changed size while being read");
    return unpack_checked_bytes(all, path);
}

void ByteWriter::u64(std::uint64_t v) { put_u64(bytes_, v); }
void ByteWriter::f64(double v) { bytes_.append(reinterpret_cast<const char*>(&v), sizeof v); }
void ByteWriter::str(const std::string& s) {
    u64(s.size());
    bytes_ += s;
}
void ByteWriter::floats(std::span<const float> v) {
    u64(v.size());
    bytes_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

void ByteWriter::doubles(std::span<const double> v) {
    u64(v.size());
    bytes_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(double));
}

ByteReader::ByteReader(const std::string& bytes, std::string context) : bytes_(bytes), context_(std::move(context)) {}

const char* ByteReader::take(std::size_t n) {
    if (bytes_.size() - pos_ < n)
        throw DataError(context_ + ": record ends early (wanted " + std::to_string(n) + " bytes at offset " +
                        std::to_string(pos_) + ", " + std::to_string(bytes_.size() - pos_) + " left)");
    const char* p = bytes_.data() + pos_;
    pos_ += n;
    return p;
}
std::uint64_t ByteReader::u64() { return get_u64(take(8)); }
double ByteReader::f64() {
    double v;
    std::memcpy(&v, take(8), 8);
    return v;
}
std::string ByteReader::str() {
    const auto n = u64();
    return std::string(take(n), n);
}
template <class T>
std::vector<T> ByteReader::array(const char* what) {
    const auto n = u64();
    if (n > remaining() / sizeof(T))
        throw DataError(context_ + ": an array of " + std::to_string(n) + " " + what + " at offset " +
                        std::to_string(pos_ - 8) + " is longer than the " + std::to_string(remaining()) +
                        " bytes left");
    std::vector<T> v(n);
    // memcpy needs valid pointers even for 0 bytes, and an empty vector's data() may be null.
    if (n != 0) std::memcpy(v.data(), take(n * sizeof(T)), n * sizeof(T));
    return v;
}

std::vector<float> ByteReader::floats() { return array<float>("floats"); }
std::vector<double> ByteReader::doubles() { return array<double>("doubles"); }

}  // namespace loom
