#pragma once
/// \file
/// Turning read data into the Values a graph is fed with: a minibatch of QA pairs as token-id
/// sequences (each side with its own lengths) plus labels, and a minibatch of CTF sequences of one
/// stream.
#include <cstddef>
#include <string>
#include <vector>

#include "core/value.hpp"
#include "data/ctf.hpp"
#include "data/qa.hpp"
#include "data/vocabulary.hpp"

namespace loom {

/// The inputs of a question/answer model for one minibatch of a QaData, ready to bind.
struct QaMinibatch {
    std::vector<std::size_t> items;  ///< indices into QaData::pairs, in batch order
    Value questions;                 ///< index sequences, sample shape [1]
    Value answers;                   ///< index sequences, sample shape [1]
    Value labels;                    ///< batch [N, 1] of 0 / 1
};

/// The minibatch of `items`: their questions and answers as token ids through `vocab` (unknown
/// words as its unknown id), and their labels. Throws UserError for an empty batch or an item index
/// out of range.
QaMinibatch make_qa_minibatch(const QaData& data, const Vocabulary& vocab, const std::vector<std::size_t>& items);

/// The given sequences of one CTF stream as a sequence Value: dense [T_i, dim] each (sparse samples
/// expanded), or token ids [T_i, 1] when `as_indices` (sparse one-hot streams). Sequences must have
/// at least one sample of the stream.
Value make_ctf_minibatch(const CtfData& data, const std::string& stream, const std::vector<std::size_t>& sequences,
                         bool as_indices = false);

}  // namespace loom
