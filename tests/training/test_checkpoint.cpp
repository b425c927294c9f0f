// Checkpoints: round trip, damaged files (truncated, one corrupted byte) give DataError and leave
// the previous checkpoint and the model intact, mismatched models are named, and a resumed run
// reproduces the uninterrupted one exactly.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include <csignal>

#include <sys/resource.h>
#include <unistd.h>

#include <loom.hpp>
#include "test_support.hpp"

using namespace loom;
using loom::testing::read_bytes;
using loom::testing::TempDir;
using loom::testing::write_bytes;
namespace fs = std::filesystem;

namespace {

// A small model whose initial values come from `seed`, so two builds can start differently.
struct Model {
    Variable x = input_variable({3}, "x");
    Variable y = input_variable({2}, "y");
    Parameter w1, b1, w2;
    Variable loss;

    explicit Model(std::uint64_t seed) {
        Rng rng(seed);
        w1 = parameter(xt::cast<float>(glorot_uniform()(Shape{3, 4}, rng)), "w1");
        b1 = parameter(xt::cast<float>(uniform(0.1)(Shape{4}, rng)), "b1");
        w2 = parameter(xt::cast<float>(glorot_uniform()(Shape{4, 2}, rng)), "w2");
        loss = square(times(tanh(times(x, w1) + b1), w2) - y);
    }
    std::vector<Parameter> params() const { return {w1, b1, w2}; }

    // Minibatch i: deterministic data, different for each i.
    Bindings minibatch(std::size_t i) const {
        Rng rng(1000 + i);
        std::normal_distribution<float> d(0.0f, 1.0f);
        xt::xarray<float> xs = xt::zeros<float>({6, 3}), ys = xt::zeros<float>({6, 2});
        for (auto& v : xs) v = d(rng);
        for (std::size_t n = 0; n < 6; ++n) {
            ys(n, 0) = std::sin(xs(n, 0)) + 0.5f * xs(n, 1);
            ys(n, 1) = xs(n, 2) * xs(n, 0);
        }
        return {{x, Value::batch(xs)}, {y, Value::batch(ys)}};
    }
};

// Adam with a warmup schedule and clipping: the resumed run needs the moments, the step count (for
// bias correction and the schedule) and the parameters all restored.
std::unique_ptr<Learner> make_learner(const Model& m) {
    LearnerOptions o;
    o.gradient_clipping_norm = 2.0;
    o.l2_weight_decay = 1e-3;
    return adam(m.params(), warmup_linear_decay(0.05, 3, 20), 0.9, 0.999, 1e-8, o);
}

}  // namespace

TEST_CASE("checkpoint round trip restores parameters and learner state and position and extras") {
    TempDir dir("roundtrip");
    Model a(1);
    Trainer ta(a.loss, Variable(), make_learner(a));
    for (std::size_t i = 0; i < 3; ++i) ta.train_minibatch(a.minibatch(i));
    TrainingPosition pos{2, 1, 18, std::string("reader\0state", 12)};
    ta.save_checkpoint(dir.file("ckpt"), pos, {{"best", "0.25"}});

    Model b(2);
    Trainer tb(b.loss, Variable(), make_learner(b));
    CHECK_FALSE(b.w1.value() == a.w1.value());
    const Checkpoint c = tb.load_checkpoint(dir.file("ckpt"));
    CHECK(c.position == pos);
    CHECK(c.extras.size() == 1);
    CHECK(c.extras.at("best") == "0.25");
    for (std::size_t i = 0; i < 3; ++i) CHECK(b.params()[i].value() == a.params()[i].value());
    CHECK(tb.learner().step_count() == 3);
    CHECK(tb.total_samples_seen() == 18);
    // The next step is identical in both.
    CHECK(ta.train_minibatch(a.minibatch(3)).loss_sum == tb.train_minibatch(b.minibatch(3)).loss_sum);
    CHECK(b.w2.value() == a.w2.value());

    // Parameters only (no learner).
    Model c2(3);
    save_checkpoint(dir.file("params"), c2.params(), nullptr);
    Model d(4);
    load_checkpoint(dir.file("params"), d.params(), nullptr);
    CHECK(d.w1.value() == c2.w1.value());
    auto l = make_learner(d);
    CHECK_THROWS_AS(load_checkpoint(dir.file("params"), d.params(), l.get()), UserError);
}

TEST_CASE("checkpoint: truncated file is a DataError and the previous good one still loads") {
    TempDir dir("truncated");
    Model a(1);
    auto la = make_learner(a);
    save_checkpoint(dir.file("good"), a.params(), la.get());
    const std::string bytes = read_bytes(dir.file("good"));
    for (std::size_t keep : {std::size_t(0), std::size_t(10), bytes.size() / 2, bytes.size() - 1}) {
        CAPTURE(keep);
        write_bytes(dir.file("bad"), bytes.substr(0, keep));
        Model b(2);
        auto lb = make_learner(b);
        const auto before = b.w1.value();
        CHECK_THROWS_AS(load_checkpoint(dir.file("bad"), b.params(), lb.get()), DataError);
        CHECK(b.w1.value() == before);  // a failed load changes nothing
        load_checkpoint(dir.file("good"), b.params(), lb.get());
        CHECK(b.w1.value() == a.w1.value());
    }
    // A crash in the middle of the next save leaves at most a partial temporary file.
    write_bytes(dir.file("good") + ".tmp", bytes.substr(0, 20));
    Model c(3);
    load_checkpoint(dir.file("good"), c.params(), nullptr);
    CHECK(c.b1.value() == a.b1.value());
}

TEST_CASE("checkpoint: a corrupted byte is a DataError naming the file") {
    TempDir dir("corrupt");
    Model a(1);
    save_checkpoint(dir.file("ckpt"), a.params(), nullptr);
    const std::string bytes = read_bytes(dir.file("ckpt"));
    for (std::size_t at : {bytes.size() / 3, bytes.size() - 2}) {
        std::string bad = bytes;
        bad[at] = static_cast<char>(bad[at] ^ 0x10);
        write_bytes(dir.file("ckpt"), bad);
        Model b(2);
        try {
            load_checkpoint(dir.file("ckpt"), b.params(), nullptr);
            FAIL("a corrupted checkpoint loaded");
        } catch (const DataError& e) {
            CHECK(std::string(e.what()).find(dir.file("ckpt")) != std::string::npos);
        }
    }
}

TEST_CASE("checkpoint: a failed save leaves the previous checkpoint intact") {
    TempDir dir("failedsave");
    Model a(1);
    save_checkpoint(dir.file("ckpt"), a.params(), nullptr);
    const std::string good = read_bytes(dir.file("ckpt"));
    // The temporary file cannot be written in full (a file size limit, as a full disk), so the
    // save fails.
    Model b(2);
    std::signal(SIGXFSZ, SIG_IGN);
    rlimit old_limit{};
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &old_limit) == 0);
    rlimit small = old_limit;
    small.rlim_cur = 64;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
    CHECK_THROWS_AS(save_checkpoint(dir.file("ckpt"), b.params(), nullptr), UserError);
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &old_limit) == 0);
    CHECK(read_bytes(dir.file("ckpt")) == good);
    Model c(3);
    load_checkpoint(dir.file("ckpt"), c.params(), nullptr);
    CHECK(c.w2.value() == a.w2.value());
}

TEST_CASE("checkpoint: a different model is refused with the mismatching parameter named") {
    TempDir dir("mismatch");
    Model a(1);
    save_checkpoint(dir.file("ckpt"), a.params(), nullptr);
    Parameter wide = parameter({3, 5}, zeros(), "w1");
    Parameter renamed = parameter({4}, zeros(), "bias");
    auto message = [&](std::vector<Parameter> ps) {
        try {
            load_checkpoint(dir.file("ckpt"), ps, nullptr);
        } catch (const UserError& e) {
            return std::string(e.what());
        }
        return std::string("no error");
    };
    CHECK(message({wide, a.b1, a.w2}).find("parameter #0 is 'w1' [3, 4] in the file but 'w1' [3, 5] in the model") !=
          std::string::npos);
    CHECK(message({a.w1, renamed, a.w2}).find("'b1' [4] in the file but 'bias' [4]") != std::string::npos);
    CHECK(message({a.w1, a.b1}).find("holds 3 parameters, the model passed has 2") != std::string::npos);
    CHECK(a.w1.value() == Model(1).w1.value());
}

TEST_CASE("checkpoint: resuming reproduces the uninterrupted run exactly") {
    TempDir dir("resume");
    constexpr std::size_t total = 12, stop = 5;

    // Uninterrupted.
    std::vector<double> straight;
    {
        Model m(7);
        Trainer t(m.loss, Variable(), make_learner(m));
        for (std::size_t i = 0; i < total; ++i) straight.push_back(t.train_minibatch(m.minibatch(i)).loss_sum);
    }
    // Interrupted after `stop` steps, then resumed in a fresh model and learner.
    std::vector<double> resumed;
    {
        Model m(7);
        Trainer t(m.loss, Variable(), make_learner(m));
        for (std::size_t i = 0; i < stop; ++i) resumed.push_back(t.train_minibatch(m.minibatch(i)).loss_sum);
        t.save_checkpoint(dir.file("ckpt"), TrainingPosition{0, stop, stop * 6, {}});
    }
    {
        Model m(99);  // different initial values: everything must come from the file
        Trainer t(m.loss, Variable(), make_learner(m));
        const Checkpoint c = t.load_checkpoint(dir.file("ckpt"));
        REQUIRE(c.position.minibatch == stop);
        for (std::size_t i = c.position.minibatch; i < total; ++i)
            resumed.push_back(t.train_minibatch(m.minibatch(i)).loss_sum);
    }
    REQUIRE(resumed.size() == straight.size());
    for (std::size_t i = 0; i < total; ++i) {
        CAPTURE(i);
        CHECK(resumed[i] == straight[i]);  // bitwise
    }
    CHECK(straight.back() < straight.front());
}

namespace {

// The small model with dropout 0.3 on its input and on its hidden layer (two generators, so their
// order in the file matters too), built the same way each time: the same seeds.
struct DropoutModel : Model {
    explicit DropoutModel(std::uint64_t seed) : Model(seed) {
        Variable hidden = dropout(tanh(times(dropout(x, 0.3, 11), w1) + b1), 0.3, 12);
        loss = square(times(hidden, w2) - y);
    }
};

// Losses of minibatches [from, to) through a Trainer in training mode (dropout active).
std::vector<double> train_range(Trainer& t, const Model& m, std::size_t from, std::size_t to) {
    const TrainingScope training;
    std::vector<double> losses;
    for (std::size_t i = from; i < to; ++i) losses.push_back(t.train_minibatch(m.minibatch(i)).loss_sum);
    return losses;
}

}  // namespace

TEST_CASE("checkpoint: resuming with dropout reproduces the uninterrupted run exactly") {
    TempDir dir("dropout");
    constexpr std::size_t total = 10, stop = 4;
    DropoutModel straight_model(7);
    Trainer straight_trainer(straight_model.loss, Variable(), make_learner(straight_model));
    const std::vector<double> straight = train_range(straight_trainer, straight_model, 0, total);

    std::vector<double> resumed;
    {
        DropoutModel m(7);
        Trainer t(m.loss, Variable(), make_learner(m));
        resumed = train_range(t, m, 0, stop);
        t.save_checkpoint(dir.file("ckpt"));
        train_range(t, m, stop, stop + 2);  // the generators move on after the save
    }
    DropoutModel m(99);
    Trainer t(m.loss, Variable(), make_learner(m));
    t.load_checkpoint(dir.file("ckpt"));
    for (double loss : train_range(t, m, stop, total)) resumed.push_back(loss);

    REQUIRE(resumed.size() == total);
    for (std::size_t i = 0; i < total; ++i) {
        CAPTURE(i);
        CHECK(resumed[i] == straight[i]);  // bitwise
    }
    for (std::size_t i = 0; i < 3; ++i) CHECK(m.params()[i].value() == straight_model.params()[i].value());
}

TEST_CASE("checkpoint: generator states of another graph or damaged ones are refused before anything changes") {
    TempDir dir("generators");
    DropoutModel a(1);
    Trainer ta(a.loss, Variable(), make_learner(a));
    train_range(ta, a, 0, 2);
    ta.save_checkpoint(dir.file("two"));

    // The same parameters without dropout: a graph with no generator.
    Model b(2);
    Trainer tb(b.loss, Variable(), make_learner(b));
    const auto before = b.w1.value();
    CHECK_THROWS_WITH_AS(tb.load_checkpoint(dir.file("two")),
                         doctest::Contains("holds the state of 2 random generators (dropout), this trainer's "
                                           "graph draws from 0; build the same model"),
                         UserError);
    CHECK(b.w1.value() == before);
    CHECK(tb.learner().step_count() == 0);

    // A record that is not a generator state (written through the free function, checksummed).
    ByteWriter bad;
    bad.u64(2);
    bad.str("not a state");
    bad.str("12 34");
    save_checkpoint(dir.file("bad"), a.params(), &ta.learner(), {}, {{"loom.trainer.generators", bad.bytes()}});
    DropoutModel c(3);
    Trainer tc(c.loss, Variable(), make_learner(c));
    const auto c_before = c.w1.value();
    CHECK_THROWS_WITH_AS(tc.load_checkpoint(dir.file("bad")),
                         doctest::Contains("(random generator 0): not the state of a random generator"), DataError);
    CHECK(c.w1.value() == c_before);

    // A checkpoint without generator states (an older file, or the free function's) still loads.
    save_checkpoint(dir.file("plain"), a.params(), &ta.learner());
    tc.load_checkpoint(dir.file("plain"));
    CHECK(c.w1.value() == a.w1.value());
    CHECK(tc.learner().step_count() == 2);
}

TEST_CASE("checkpoint: a non-finite parameter or learner state is never written") {
    TempDir dir("nonfinite");
    Model a(1);
    auto learner = make_learner(a);
    save_checkpoint(dir.file("ckpt"), a.params(), learner.get());
    const std::string good = read_bytes(dir.file("ckpt"));

    xt::xarray<float> b1 = a.b1.value();
    b1(2) = std::numeric_limits<float>::quiet_NaN();
    a.b1.set_value(b1);
    CHECK_THROWS_WITH_AS(save_checkpoint(dir.file("ckpt"), a.params(), nullptr),
                         doctest::Contains("parameter 'b1' [4] holds nan at element 2"), UserError);
    b1(2) = std::numeric_limits<float>::infinity();
    a.b1.set_value(b1);
    CHECK_THROWS_WITH_AS(save_checkpoint(dir.file("ckpt"), a.params(), learner.get()),
                         doctest::Contains("holds inf at element 2"), UserError);
    CHECK(read_bytes(dir.file("ckpt")) == good);  // the previous file is untouched

    // Finite parameters, but Adam's moments turned NaN by a NaN gradient (no guard: the bare learner).
    Model m(2);
    auto adam_learner = adam(m.params(), 0.01);
    Session s({m.loss}, m.params());
    Bindings in = m.minibatch(0);
    xt::xarray<float> xs = in.at(m.x).rows();
    xs(0, 0) = std::numeric_limits<float>::quiet_NaN();
    in[m.x] = Value::batch(xs);
    s.forward(in);
    s.backward();
    adam_learner->update(s);
    for (auto& p : m.params()) p.set_value(xt::zeros<float>(p.shape().dims()));
    CHECK_THROWS_WITH_AS(save_checkpoint(dir.file("ckpt"), m.params(), adam_learner.get()),
                         doctest::Contains("adam: its state for"), UserError);
    CHECK(read_bytes(dir.file("ckpt")) == good);
}
