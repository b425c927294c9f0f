#pragma once
// Checked binary files. A file is a header (magic, format version, payload size, FNV-1a 64-bit
// checksum) followed by the payload; it is written to a temporary name, flushed, synced and renamed,
// so a crash never leaves a half-written file under the real name.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace loom {

void write_checked_file(const std::string& path, const std::string& payload);
// Throws DataError naming the file and what is wrong (missing, truncated, not a loom file, checksum).
std::string read_checked_file(const std::string& path);

std::uint64_t fnv1a64(const void* data, std::size_t size);

class ByteWriter {
public:
    void u64(std::uint64_t v);
    void f64(double v);
    void str(const std::string& s);
    void floats(std::span<const float> v);
    const std::string& bytes() const { return bytes_; }

private:
    std::string bytes_;
};

class ByteReader {
public:
    // `context` names the source in error messages (a file name).
    ByteReader(const std::string& bytes, std::string context);
    std::uint64_t u64();
    double f64();
    std::string str();
    std::vector<float> floats();
    bool done() const { return pos_ == bytes_.size(); }

private:
    const char* take(std::size_t n);
    const std::string& bytes_;
    std::string context_;
    std::size_t pos_ = 0;
};

}  // namespace loom
