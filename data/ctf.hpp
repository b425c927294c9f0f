#pragma once
/// \file
/// Reader for the CNTK Text Format (CTF), as documented for CNTK's CNTKTextFormatReader:
///
///   [Sequence_Id] |name v v v |name idx:val idx:val |# a comment
///
/// Each line holds at most one sample per input stream. Consecutive lines with the same sequence
/// id form one sequence; a line without an id is a sequence of its own (CNTK uses the line number
/// as its id). Every stream has its own length within a sequence (a question and its answer
/// differ). Dense streams list exactly `dim` numbers per sample; sparse streams list idx:val pairs
/// with idx < dim. A comment starts with "|#" and runs to the end of the line or to the next pipe
/// that is not escaped as "|#" (as CNTK's documentation specifies). Blank lines are skipped.
/// Malformed input throws DataError "file:line: reason". make_ctf_minibatch turns sequences of one
/// stream into the Value a graph is fed with.
#include <cstddef>
#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include <xtensor/xarray.hpp>

#include "core/value.hpp"

namespace loom {

/// One input stream of a CTF file, as the reader is told to expect it.
struct CtfStreamConfig {
    std::string name;     ///< the name after the pipe (`|name`)
    std::size_t dim = 0;  ///< numbers per dense sample, or the bound on a sparse stream's indices
    bool sparse = false;  ///< sparse (idx:val pairs) rather than dense
};

/// One idx:val pair of a sparse sample.
struct CtfSparseEntry {
    std::size_t index = 0;  ///< below the stream's dim
    float value = 0.0f;     ///< the value at that index
};

/// The samples of one stream within one sequence.
struct CtfStream {
    std::size_t length = 0;                                   ///< number of samples (time steps)
    std::vector<float> dense_values;                          ///< dense streams: [length * dim], row-major
    std::vector<std::vector<CtfSparseEntry>> sparse_samples;  ///< sparse streams: entries of each sample
};

/// One sequence: the lines sharing a sequence id, with each stream's samples.
struct CtfSequence {
    std::uint64_t id = 0;            ///< the explicit id, or the line number when the line had none
    std::size_t first_line = 0;      ///< 1-based line where the sequence starts (for messages)
    std::vector<CtfStream> streams;  ///< in configuration order
};

/// A whole CTF file, read: its streams and its sequences in file order.
class CtfData {
public:
    std::string source;                   ///< file name used in messages
    std::vector<CtfStreamConfig> config;  ///< the streams, in the order given to the reader
    std::vector<CtfSequence> sequences;   ///< in file order

    /// \return the number of sequences.
    std::size_t size() const { return sequences.size(); }
    /// Index of a stream in `config`; throws UserError listing the configured names.
    std::size_t stream_index(const std::string& name) const;
    /// One stream of one sequence as a dense [length, dim] tensor (sparse samples expanded).
    xt::xarray<float> dense(std::size_t sequence, const std::string& name) const;
    /// One sparse stream of one sequence as token ids: each sample must hold exactly one entry
    /// (a one-hot word), else DataError naming the file and the sequence's first line.
    std::vector<std::size_t> indices(std::size_t sequence, const std::string& name) const;
};

/// Throws UserError for a bad configuration (no streams, dim 0, duplicate or malformed names).
CtfData read_ctf(const std::string& path, const std::vector<CtfStreamConfig>& streams);
/// Same, from any stream; `source` names it in error messages.
CtfData parse_ctf(std::istream& in, const std::string& source, const std::vector<CtfStreamConfig>& streams);

/// The given sequences of one CTF stream as a sequence Value: dense [T_i, dim] each (sparse samples
/// expanded), or token ids [T_i, 1] when `as_indices` (sparse one-hot streams). Sequences must have
/// at least one sample of the stream.
Value make_ctf_minibatch(const CtfData& data, const std::string& stream, const std::vector<std::size_t>& sequences,
                         bool as_indices = false);

}  // namespace loom
