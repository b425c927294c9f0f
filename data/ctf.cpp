#include "data/ctf.hpp"

#include <algorithm>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "core/errors.hpp"
#include "core/serialization.hpp"
#include "data/text.hpp"

namespace loom {

namespace {

using data_text::fail;

std::string configured_names(const std::vector<CtfStreamConfig>& streams) {
    std::string names;
    for (const auto& s : streams) names += (names.empty() ? "" : ", ") + s.name;
    return names;
}

void check_config(const std::vector<CtfStreamConfig>& streams) {
    if (streams.empty()) throw UserError("CTF reader: no input streams configured; give at least one {name, dim}");
    for (std::size_t i = 0; i < streams.size(); ++i) {
        const auto& s = streams[i];
        if (s.name.empty() || s.name.find_first_of(" \t|") != std::string::npos || s.name.front() == '#')
            throw UserError("CTF reader: stream name " + quoted_field(s.name) +
                            " is not usable: it must be non-empty, without spaces or '|', and not start with '#'");
        if (s.dim == 0) throw UserError("CTF reader: stream '" + s.name + "' has dim 0; give its sample dimension");
        for (std::size_t j = 0; j < i; ++j)
            if (streams[j].name == s.name) throw UserError("CTF reader: stream '" + s.name + "' is configured twice");
    }
}

void skip_whitespace(std::string_view& rest) {
    const std::size_t n = rest.find_first_not_of(" \t");
    rest.remove_prefix(n == std::string_view::npos ? rest.size() : n);
}

std::string_view take_until(std::string_view& rest, std::string_view stops) {
    std::size_t n = rest.find_first_of(stops);
    if (n == std::string_view::npos) n = rest.size();
    std::string_view token = rest.substr(0, n);
    rest.remove_prefix(n);
    return token;
}

// `rest` starts just after "|#". The body ends at the end of the line or at a pipe that is not
// itself followed by '#' ("|#" inside a comment is an escaped pipe).
void skip_comment(std::string_view& rest) {
    rest.remove_prefix(1);
    for (;;) {
        const std::size_t pipe = rest.find('|');
        if (pipe == std::string_view::npos) {
            rest = {};
            return;
        }
        if (pipe + 1 < rest.size() && rest[pipe + 1] == '#') {
            rest.remove_prefix(pipe + 2);
            continue;
        }
        rest.remove_prefix(pipe);
        return;
    }
}

struct LineContext {
    const std::string& source;
    std::size_t line;
    const CtfStreamConfig& stream;
};

void parse_dense(const LineContext& at, const std::vector<std::string>& tokens, CtfStream& out) {
    if (tokens.size() != at.stream.dim)
        fail(at.source, at.line,
             "input '" + at.stream.name + "' is dense with dim " + std::to_string(at.stream.dim) +
                 " but this sample has " + std::to_string(tokens.size()) + " values");
    for (const auto& token : tokens) {
        float v = 0.0f;
        if (const auto status = data_text::parse_float(token, v); status != data_text::NumberStatus::ok)
            fail(at.source, at.line,
                 "value " + quoted_field(token) + " of input '" + at.stream.name + "' " +
                     data_text::float_problem(status));
        out.dense_values.push_back(v);
    }
}

void parse_sparse(const LineContext& at, const std::vector<std::string>& tokens, CtfStream& out) {
    std::vector<CtfSparseEntry> sample;
    sample.reserve(tokens.size());
    for (const auto& token : tokens) {
        const std::size_t colon = token.find(':');
        if (colon == std::string::npos)
            fail(at.source, at.line,
                 "sparse input '" + at.stream.name + "' expects index:value entries, got " + quoted_field(token));
        const std::string_view index_text = std::string_view(token).substr(0, colon);
        const std::string_view value_text = std::string_view(token).substr(colon + 1);
        CtfSparseEntry entry;
        const auto index_status = data_text::parse_index(index_text, entry.index);
        if (index_status == data_text::NumberStatus::not_a_number)
            fail(at.source, at.line,
                 "index " + quoted_field(index_text) + " of input '" + at.stream.name +
                     "' is not a non-negative integer");
        if (index_status == data_text::NumberStatus::too_large || entry.index >= at.stream.dim)
            fail(at.source, at.line,
                 "index " +
                     (index_status == data_text::NumberStatus::ok ? std::to_string(entry.index)
                                                                  : quoted_field(index_text)) +
                     " of input '" + at.stream.name + "' is out of range: its dim is " + std::to_string(at.stream.dim) +
                     " (indices 0 to " + std::to_string(at.stream.dim - 1) + ")");
        if (const auto status = data_text::parse_float(value_text, entry.value); status != data_text::NumberStatus::ok)
            fail(at.source, at.line,
                 "value " + quoted_field(value_text) + " of input '" + at.stream.name + "' " +
                     data_text::float_problem(status));
        for (const auto& earlier : sample)
            if (earlier.index == entry.index)
                fail(at.source, at.line,
                     "index " + std::to_string(entry.index) + " appears twice in one sample of input '" +
                         at.stream.name + "'");
        sample.push_back(entry);
    }
    out.sparse_samples.push_back(std::move(sample));
}

// The sequence id a line may start with; `rest` starts at the line's first non-blank.
std::optional<std::uint64_t> read_sequence_id(std::string_view& rest, const std::string& source, std::size_t line_no) {
    if (rest.front() == '|') return std::nullopt;
    const std::string_view token = take_until(rest, " \t|");
    std::size_t value = 0;
    const auto status = data_text::parse_index(token, value);
    if (status == data_text::NumberStatus::too_large)
        fail(source, line_no, "sequence id " + quoted_field(token) + " is too large (largest 2^64-1)");
    if (status != data_text::NumberStatus::ok)
        fail(source, line_no,
             "sequence id " + quoted_field(token) +
                 " is not a non-negative integer (a line is: [sequence id] |input values ...)");
    return value;
}

// What parse_ctf keeps from line to line.
class CtfLines {
public:
    CtfLines(const std::string& source, const std::vector<CtfStreamConfig>& streams)
        : source_(source), streams_(streams), seen_(streams.size()) {
        for (std::size_t k = 0; k < streams.size(); ++k) by_name_.emplace(streams[k].name, k);
        data_.source = source;
        data_.config = streams;
    }

    void read(std::string_view rest, std::size_t line_no);
    CtfData take() { return std::move(data_); }

private:
    std::size_t read_stream_name(std::string_view& rest, std::size_t line_no);
    CtfSequence& sequence_of_line(std::optional<std::uint64_t> id, std::size_t line_no);

    const std::string& source_;
    const std::vector<CtfStreamConfig>& streams_;
    std::unordered_map<std::string_view, std::size_t> by_name_;
    CtfData data_;
    // Only a sequence opened by an explicit id can be continued by the next line.
    std::optional<std::uint64_t> open_id_;
    std::vector<char> seen_;  // per stream: whether the line has given it a sample
};

void CtfLines::read(std::string_view rest, std::size_t line_no) {
    skip_whitespace(rest);
    if (rest.empty()) return;
    const std::optional<std::uint64_t> id = read_sequence_id(rest, source_, line_no);
    std::fill(seen_.begin(), seen_.end(), 0);
    CtfSequence* sequence = nullptr;
    bool any_comment = false;
    for (;;) {
        skip_whitespace(rest);
        if (rest.empty()) break;
        if (rest.front() != '|')
            fail(source_, line_no,
                 "unexpected text " + quoted_field(take_until(rest, " \t|")) + ": values must follow an |input name");
        rest.remove_prefix(1);
        if (!rest.empty() && rest.front() == '#') {
            skip_comment(rest);
            any_comment = true;
            continue;
        }
        const std::size_t k = read_stream_name(rest, line_no);
        const std::vector<std::string> tokens = data_text::split_whitespace(take_until(rest, "|"));
        if (tokens.empty()) fail(source_, line_no, "input '" + streams_[k].name + "' has an empty sample (no values)");
        if (sequence == nullptr) sequence = &sequence_of_line(id, line_no);
        CtfStream& stream = sequence->streams[k];
        const LineContext at{source_, line_no, streams_[k]};
        if (streams_[k].sparse)
            parse_sparse(at, tokens, stream);
        else
            parse_dense(at, tokens, stream);
        ++stream.length;
    }
    if (sequence == nullptr && !any_comment)
        fail(source_, line_no,
             "sequence id " + std::to_string(id.value_or(0)) + " is not followed by any |input sample");
}

// The stream named just after a '|': a configured one, not given a sample before on this line.
std::size_t CtfLines::read_stream_name(std::string_view& rest, std::size_t line_no) {
    const std::string_view name = take_until(rest, " \t|");
    if (name.empty()) fail(source_, line_no, "'|' is not followed by an input name");
    const auto found = by_name_.find(name);
    if (found == by_name_.end())
        fail(
            source_, line_no,
            "unknown input stream " + quoted_field(name) + " (configured streams: " + configured_names(streams_) + ")");
    const std::size_t k = found->second;
    if (seen_[k])
        fail(source_, line_no,
             "input '" + streams_[k].name + "' appears twice on one line (one sample per input per line)");
    seen_[k] = 1;
    return k;
}

// The sequence a line's samples go to: the open one when the line repeats its id, else a new one.
CtfSequence& CtfLines::sequence_of_line(std::optional<std::uint64_t> id, std::size_t line_no) {
    const bool continues = id && open_id_ && *id == *open_id_ && !data_.sequences.empty();
    if (!continues) {
        CtfSequence fresh;
        fresh.id = id.value_or(line_no);
        fresh.first_line = line_no;
        fresh.streams.resize(streams_.size());
        data_.sequences.push_back(std::move(fresh));
    }
    open_id_ = id;
    return data_.sequences.back();
}

}  // namespace

CtfData parse_ctf(std::istream& in, const std::string& source, const std::vector<CtfStreamConfig>& streams) {
    check_config(streams);
    CtfLines ctf(source, streams);
    // CTF is numbers and names; a stray byte there is reported by the parser, and a comment may
    // hold any bytes but NUL.
    data_text::LineReader lines(in, source, data_text::TextCheck::nul_bytes);
    std::string line;
    while (lines.next(line)) ctf.read(line, lines.line_number());
    return ctf.take();
}

CtfData read_ctf(const std::string& path, const std::vector<CtfStreamConfig>& streams) {
    check_config(streams);
    std::ifstream in = data_text::open_for_reading(path);
    return parse_ctf(in, path, streams);
}

std::size_t CtfData::stream_index(const std::string& name) const {
    for (std::size_t k = 0; k < config.size(); ++k)
        if (config[k].name == name) return k;
    throw UserError("CTF data from '" + source + "' has no stream '" + name +
                    "' (configured streams: " + configured_names(config) + ")");
}

xt::xarray<float> CtfData::dense(std::size_t sequence, const std::string& name) const {
    if (sequence >= sequences.size())
        throw UserError("CTF data from '" + source + "': sequence " + std::to_string(sequence) + " requested, only " +
                        std::to_string(sequences.size()) + " read");
    const std::size_t k = stream_index(name);
    const CtfStream& stream = sequences[sequence].streams[k];
    const std::size_t dim = config[k].dim;
    xt::xarray<float> out = xt::zeros<float>({stream.length, dim});
    if (!config[k].sparse) {
        std::copy(stream.dense_values.begin(), stream.dense_values.end(), out.begin());
        return out;
    }
    for (std::size_t t = 0; t < stream.length; ++t)
        for (const auto& entry : stream.sparse_samples[t]) out(t, entry.index) = entry.value;
    return out;
}

std::vector<std::size_t> CtfData::indices(std::size_t sequence, const std::string& name) const {
    if (sequence >= sequences.size())
        throw UserError("CTF data from '" + source + "': sequence " + std::to_string(sequence) + " requested, only " +
                        std::to_string(sequences.size()) + " read");
    const std::size_t k = stream_index(name);
    const CtfSequence& seq = sequences[sequence];
    if (!config[k].sparse)
        throw UserError("CTF stream '" + name + "' is dense; token ids come from a sparse (one-hot) stream");
    std::vector<std::size_t> ids;
    ids.reserve(seq.streams[k].length);
    for (const auto& sample : seq.streams[k].sparse_samples) {
        if (sample.size() != 1)
            fail(source, seq.first_line,
                 "stream '" + name + "' of the sequence starting here has a sample with " +
                     std::to_string(sample.size()) + " entries; token ids need exactly one index per sample");
        ids.push_back(sample.front().index);
    }
    return ids;
}

Value make_ctf_minibatch(const CtfData& data, const std::string& stream, const std::vector<std::size_t>& sequences,
                         bool as_indices) {
    if (sequences.empty()) throw UserError("make_ctf_minibatch: empty batch of sequences from '" + data.source + "'");
    const std::size_t k = data.stream_index(stream);
    for (std::size_t s : sequences) {
        if (s >= data.size())
            throw UserError("make_ctf_minibatch: sequence " + std::to_string(s) + " out of range: '" + data.source +
                            "' has " + std::to_string(data.size()) + " sequences");
        // A graph sequence cannot be empty; say which sequence of the file lacks the stream.
        if (data.sequences[s].streams[k].length == 0)
            throw DataError(data.source + ":" + std::to_string(data.sequences[s].first_line) +
                            ": the sequence starting here has no sample of stream '" + stream + "'");
    }
    if (as_indices) {
        std::vector<std::vector<std::size_t>> ids;
        ids.reserve(sequences.size());
        for (std::size_t s : sequences) ids.push_back(data.indices(s, stream));
        return Value::index_sequences(ids);
    }
    std::vector<xt::xarray<float>> dense;
    dense.reserve(sequences.size());
    for (std::size_t s : sequences) dense.push_back(data.dense(s, stream));
    return Value::sequences(dense);
}

}  // namespace loom
