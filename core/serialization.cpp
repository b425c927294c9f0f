#include "core/serialization.hpp"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <unistd.h>

#include "core/errors.hpp"

namespace loom {

namespace {
constexpr char magic[8] = {'L', 'O', 'O', 'M', 'F', 'I', 'L', 'E'};
constexpr std::uint64_t format_version = 1;
constexpr std::size_t header_size = sizeof(magic) + 3 * sizeof(std::uint64_t);

void put_u64(std::string& s, std::uint64_t v) { s.append(reinterpret_cast<const char*>(&v), sizeof v); }
std::uint64_t get_u64(const char* p) {
    std::uint64_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
}  // namespace

std::uint64_t fnv1a64(const void* data, std::size_t size) {
    const auto* p = static_cast<const unsigned char*>(data);
    std::uint64_t h = 1469598103934665603ull;
    for (std::size_t i = 0; i < size; ++i) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

void write_checked_file(const std::string& path, const std::string& payload) {
    std::string header(magic, sizeof magic);
    put_u64(header, format_version);
    put_u64(header, payload.size());
    put_u64(header, fnv1a64(payload.data(), payload.size()));
    const std::string tmp = path + ".tmp";
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) throw UserError("cannot write '" + tmp + "': " + std::strerror(errno));
    auto write_all = [&](const std::string& s) {
        std::size_t done = 0;
        while (done < s.size()) {
            const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
            if (n < 0) {
                const std::string why = std::strerror(errno);
                ::close(fd);
                std::remove(tmp.c_str());
                throw UserError("cannot write '" + tmp + "': " + why);
            }
            done += static_cast<std::size_t>(n);
        }
    };
    write_all(header);
    write_all(payload);
    if (::fsync(fd) != 0 || ::close(fd) != 0) {
        std::remove(tmp.c_str());
        throw UserError("cannot flush '" + tmp + "' to disk: " + std::strerror(errno));
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        const std::string why = std::strerror(errno);
        std::remove(tmp.c_str());
        throw UserError("cannot rename '" + tmp + "' to '" + path + "': " + why);
    }
}

std::string read_checked_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw DataError("cannot open '" + path + "'");
    std::ostringstream ss;
    ss << in.rdbuf();
    const std::string all = ss.str();
    if (all.size() < header_size || std::memcmp(all.data(), magic, sizeof magic) != 0)
        throw DataError("'" + path + "' is not a loom file (bad or missing header)");
    const char* h = all.data() + sizeof magic;
    if (get_u64(h) != format_version)
        throw DataError("'" + path + "' has format version " + std::to_string(get_u64(h)) + "; this build reads " +
                        std::to_string(format_version));
    const std::uint64_t size = get_u64(h + 8), sum = get_u64(h + 16);
    if (all.size() - header_size != size)
        throw DataError("'" + path + "' is truncated or padded: header says " + std::to_string(size) +
                        " payload bytes, file has " + std::to_string(all.size() - header_size));
    std::string payload = all.substr(header_size);
    if (fnv1a64(payload.data(), payload.size()) != sum)
        throw DataError("'" + path + "' is corrupted: checksum mismatch");
    return payload;
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

ByteReader::ByteReader(const std::string& bytes, std::string context) : bytes_(bytes), context_(std::move(context)) {}

const char* ByteReader::take(std::size_t n) {
    if (bytes_.size() - pos_ < n)
        throw DataError(context_ + ": record ends early (wanted " + std::to_string(n) + " bytes at offset " +
                        std::to_string(pos_) + ")");
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
std::vector<float> ByteReader::floats() {
    const auto n = u64();
    if (n > (bytes_.size() - pos_) / sizeof(float)) throw DataError(context_ + ": float array longer than the record");
    std::vector<float> v(n);
    std::memcpy(v.data(), take(n * sizeof(float)), n * sizeof(float));
    return v;
}

}  // namespace loom
