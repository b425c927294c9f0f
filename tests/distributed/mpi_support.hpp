#pragma once
// What the MPI tests share: a small QA model (the sample's, at toy sizes: embedding table kept by
// rows, BiLSTM, Dense, attention), a fixed set of pairs to train on, and parameter fingerprints.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <loom.hpp>

#include "distributed/distributed.hpp"
#include "model.hpp"

namespace mpi_test {

struct Pairs {
    std::vector<std::vector<std::size_t>> questions, answers;
    std::vector<float> labels;
};

// 64 pairs of random ids (questions 2-6 tokens, answers 3-8), labels alternating; a fixed seed, so
// every process has the same pairs.
inline Pairs make_pairs(std::size_t vocab) {
    std::mt19937_64 gen(2026);
    Pairs p;
    for (std::size_t i = 0; i < 64; ++i) {
        auto ids = [&](std::size_t lo, std::size_t hi) {
            std::vector<std::size_t> s(lo + gen() % (hi - lo + 1));
            for (auto& id : s) id = gen() % vocab;
            return s;
        };
        p.questions.push_back(ids(2, 6));
        p.answers.push_back(ids(3, 8));
        p.labels.push_back(static_cast<float>(i % 2));
    }
    return p;
}

inline qa::ModelOptions toy_options() {
    qa::ModelOptions o;
    o.vocab = 30;
    o.embed = 6;
    o.hidden = 5;
    o.dense = 4;
    return o;
}

// The same initial weights in every build (and on every process).
inline qa::Model make_model(double dropout = 0.0) {
    loom::set_seed(11);
    qa::ModelOptions o = toy_options();
    o.dropout = dropout;
    return qa::Model(o);
}

inline loom::Bindings bindings(const qa::Model& m, const Pairs& p, const std::vector<std::size_t>& items) {
    std::vector<std::vector<std::size_t>> q, a;
    xt::xarray<float> labels = xt::zeros<float>({items.size(), std::size_t{1}});
    for (std::size_t k = 0; k < items.size(); ++k) {
        q.push_back(p.questions[items[k]]);
        a.push_back(p.answers[items[k]]);
        labels(k, 0) = p.labels[items[k]];
    }
    return {{m.question, loom::Value::index_sequences(q)},
            {m.answer, loom::Value::index_sequences(a)},
            {m.label, loom::Value::batch(labels)}};
}

// FNV-1a over the bytes of every parameter: equal fingerprints, equal parameters (bit for bit).
inline std::uint64_t fingerprint(const std::vector<loom::Parameter>& params) {
    std::uint64_t h = 1469598103934665603ull;
    for (const auto& p : params)
        for (float v : p.data()) {
            std::uint32_t bits = 0;
            std::memcpy(&bits, &v, sizeof bits);
            for (int b = 0; b < 4; ++b) {
                h ^= (bits >> (8 * b)) & 0xffu;
                h *= 1099511628211ull;
            }
        }
    return h;
}

// Every process's value of x, in rank order.
inline std::vector<std::uint64_t> gather(std::uint64_t x) {
    int size = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    std::vector<std::uint64_t> all(static_cast<std::size_t>(size));
    MPI_Allgather(&x, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
    return all;
}

// Largest over parameters of |a - b| / |b| (Frobenius norms).
inline double relative_difference(const std::vector<loom::Parameter>& a, const std::vector<loom::Parameter>& b) {
    double worst = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        double diff = 0, norm = 0;
        const float* x = a[i].data().data();
        const float* y = b[i].data().data();
        for (std::size_t k = 0; k < a[i].data().size(); ++k) {
            diff += (double(x[k]) - double(y[k])) * (double(x[k]) - double(y[k]));
            norm += double(y[k]) * double(y[k]);
        }
        worst = std::max(worst, std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30));
    }
    return worst;
}

// Global minibatches over 64 pairs: 4 of 32 (batch s takes pairs (s * step + k * stride) % 64, a
// different cut each time), then the given `tail` batches.
inline std::vector<std::vector<std::size_t>> cut_batches(std::size_t step, std::size_t stride,
                                                         const std::vector<std::vector<std::size_t>>& tail) {
    std::vector<std::vector<std::size_t>> all;
    for (std::size_t s = 0; s < 4; ++s) {
        std::vector<std::size_t> b;
        for (std::size_t k = 0; k < 32; ++k) b.push_back((s * step + k * stride) % 64);
        all.push_back(b);
    }
    all.insert(all.end(), tail.begin(), tail.end());
    return all;
}

}  // namespace mpi_test
