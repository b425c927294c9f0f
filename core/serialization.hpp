#pragma once
/// \file
/// Checked binary files. A file is a header (magic, format version, payload size, FNV-1a 64-bit
/// checksum) followed by the payload; it is written to a temporary name, flushed, synced and renamed,
/// so a crash never leaves a half-written file under the real name.
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace loom {

/// Writes `payload` behind the header above to `path`, atomically (write_file_atomically).
void write_checked_file(const std::string& path, const std::string& payload);
/// Throws DataError naming the file and what is wrong (missing, a directory, truncated, not a loom
/// file, checksum).
std::string read_checked_file(const std::string& path);
/// The same two steps on bytes in memory: header + payload, and the checked payload back
/// (`source` names the bytes in messages).
std::string checked_bytes(std::string_view payload);
/// \param bytes  what checked_bytes() made
/// \param source  names the bytes in a DataError
/// \return the payload, once the header, the size and the checksum are right.
std::string unpack_checked_bytes(const std::string& bytes, const std::string& source);

/// Writes the parts, in order, to a temporary file next to `path` that is synced and renamed over
/// `path`. The temporary, `<path>.loom-tmp.<pid>.<n>`, is flock-ed by its writer until the rename;
/// each save removes the temporaries next to `path` that nobody holds (those of writers that were
/// killed before their rename, and the `<path>.tmp` of earlier loom versions). Throws UserError,
/// before anything is written, when `path` is something the rename would replace by a regular file
/// (not_replaceable: a device, a FIFO, a socket, a directory); every writer of the library's files
/// comes here.
void write_file_atomically(const std::string& path, std::initializer_list<std::string_view> parts);

/// What a path names, a symbolic link judged by what it leads to: the one classifier every reader
/// and writer of a user's files asks before opening.
enum class PathKind { missing, regular, directory, fifo, character_device, block_device, socket, other };
/// \return what `path` names (missing also when it cannot be examined: the open then says why).
PathKind path_kind(const std::string& path);
/// \return "a directory", "a FIFO (named pipe)", "a character device", "a block device", "a socket";
/// "" for a missing path, a regular file and anything else.
std::string path_kind_name(PathKind kind);

/// Throws DataError unless `path` is a regular file: "cannot open 'p': <the system's reason>" when
/// it cannot be examined, "'p' is a directory; <hint>", "'p' is a FIFO (named pipe), not a regular
/// file; <hint>" (a device, a socket alike). Asked by name before opening: opening a FIFO blocks
/// until a writer comes, and a device (/dev/zero) never ends.
/// \return the file's size in bytes.
std::uint64_t require_regular_file(const std::string& path, const std::string& hint);

/// What `path` is when a save must not replace it: "is a directory", "is a character device", "is a
/// block device", "is a FIFO (named pipe)" or "is a socket" (path_kind); empty when nothing is there
/// or a regular file is. Renaming a new file over /dev/null or a FIFO would put a regular file in its
/// place, so write_file_atomically and data/output_files.hpp's check_outputs refuse these.
std::string not_replaceable(const std::string& path);

/// Creates and removes the temporary write_file_atomically(path, ...) would write first, so that
/// a directory or file system that takes no such file (a read-only mount, /proc, a name too long
/// once the temporary's suffix is added) is known before any work. Nothing else is touched; throws
/// UserError "cannot create a file in 'dir': reason".
void try_temporary_beside(const std::string& path);

/// \return the 64-bit FNV-1a hash of `size` bytes at `data` (the checksum of checked files).
std::uint64_t fnv1a64(const void* data, std::size_t size);

/// A string read from a file, quoted and cut short for messages, so that a damaged file cannot
/// flood a terminal with a megabyte-long "name"; control bytes and bytes that are not UTF-8 are
/// shown as \\xNN.
std::string quoted_field(std::string_view text);

/// Appends records to a byte string, for ByteReader to read back: fixed-width numbers in the machine's byte order,
/// and strings and arrays prefixed by their length.
class ByteWriter {
public:
    /// Appends an unsigned 64-bit integer.
    void u64(std::uint64_t v);
    /// Appends a double.
    void f64(double v);
    /// Appends a string (its length, then its bytes).
    void str(const std::string& s);
    /// Appends an array of floats (its count, then the values).
    void floats(std::span<const float> v);
    /// Appends an array of doubles (its count, then the values).
    void doubles(std::span<const double> v);
    /// \return every record written so far.
    const std::string& bytes() const { return bytes_; }

private:
    std::string bytes_;
};

/// Reads the records a ByteWriter wrote. Every read is checked against what is left, so a wrong
/// count or size in a damaged record throws DataError (naming `context`) instead of reading past
/// the end or allocating for it.
class ByteReader {
public:
    /// `context` names the source in error messages (a file name).
    ByteReader(const std::string& bytes, std::string context);
    /// \return the next record as an unsigned 64-bit integer.
    std::uint64_t u64();
    /// \return the next record as a double.
    double f64();
    /// \return the next record as a string.
    std::string str();
    /// \return the next record as an array of floats.
    std::vector<float> floats();
    /// \return the next record as an array of doubles.
    std::vector<double> doubles();
    /// \return whether every byte has been read.
    bool done() const { return pos_ == bytes_.size(); }
    /// \return the bytes not read yet.
    std::size_t remaining() const { return bytes_.size() - pos_; }
    /// \return the name given at construction, for messages.
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
