#pragma once
// Checked binary files. A file is a header (magic, format version, payload size, FNV-1a 64-bit
// checksum) followed by the payload; it is written to a temporary name, flushed, synced and renamed,
// so a crash never leaves a half-written file under the real name.
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace loom {

void write_checked_file(const std::string& path, const std::string& payload);
// Throws DataError naming the file and what is wrong (missing, a directory, truncated, not a loom
// file, checksum).
std::string read_checked_file(const std::string& path);
// The same two steps on bytes in memory: header + payload, and the checked payload back
// (`source` names the bytes in messages).
std::string checked_bytes(std::string_view payload);
std::string unpack_checked_bytes(const std::string& bytes, const std::string& source);

// Writes the parts, in order, to a temporary file next to `path` that is synced and renamed over
// `path`. The temporary, `<path>.loom-tmp.<pid>.<n>`, is flock-ed by its writer until the rename;
// each save removes the temporaries next to `path` that nobody holds (those of writers that were
// killed before their rename, and the `<path>.tmp` of earlier loom versions). Throws UserError.
void write_file_atomically(const std::string& path, std::initializer_list<std::string_view> parts);

std::uint64_t fnv1a64(const void* data, std::size_t size);

// A string read from a file, quoted and cut short for messages, so that a damaged file cannot
// flood a terminal with a megabyte-long "name"; control bytes and bytes that are not UTF-8 are
// shown as \xNN.
std::string quoted_field(std::string_view text);

class ByteWriter {
public:
    void u64(std::uint64_t v);
    void f64(double v);
    void str(const std::string& s);
    void floats(std::span<const float> v);
    void doubles(std::span<const double> v);
    const std::string& bytes() const { return bytes_; }

private:
    std::string bytes_;
};

// Reads the records a ByteWriter wrote. Every read is checked against what is left, so a wrong
// count or size in a damaged record throws DataError (naming `context`) instead of reading past
// the end or allocating for it.
class ByteReader {
public:
    // `context` names the source in error messages (a file name).
    ByteReader(const std::string& bytes, std::string context);
    std::uint64_t u64();
    double f64();
    std::string str();
    std::vector<float> floats();
    std::vector<double> doubles();
    bool done() const { return pos_ == bytes_.size(); }
    std::size_t remaining() const { return bytes_.size() - pos_; }
    const std::string& context() const { return context_; }

private:
    const char* take(std::size_t n);
    template <class T>
    std::vector<T> array(const char* what);
    const std::string& bytes_;
    std::string context_;
    std::size_t pos_ = 0;
};

}  // namespace loom
