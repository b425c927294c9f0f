#include "training/checkpoint.hpp"

#include <algorithm>
#include <cmath>

#include "core/errors.hpp"
#include "core/serialization.hpp"
#include "training/learners.hpp"

namespace loom {

namespace {

constexpr const char* checkpoint_tag = "loom-checkpoint";
constexpr std::uint64_t checkpoint_version = 1;

struct StoredParameter {
    std::string name;
    Shape shape;
    std::vector<float> values;
};

std::string describe(const std::string& name, const Shape& shape) {
    return (name.empty() ? std::string("'<unnamed>'") : quoted_field(name)) + " " + shape.str();
}

// The bytes a record needs at the least, to reject an impossible count before allocating for it.
constexpr std::size_t min_parameter_bytes = 3 * sizeof(std::uint64_t);  // name, rank, value count
constexpr std::size_t min_extra_bytes = 2 * sizeof(std::uint64_t);      // key, value

}  // namespace

void save_checkpoint(const std::string& path, const std::vector<Parameter>& parameters, const Learner* learner,
                     const TrainingPosition& position, const CheckpointExtras& extras) {
    for (const auto& p : parameters) {
        const auto& data = p.data();
        const auto bad = std::find_if(data.begin(), data.end(), [](float v) { return !std::isfinite(v); });
        if (bad != data.end())
            throw UserError("save_checkpoint '" + path + "': parameter " + describe(p.name(), p.shape()) + " holds " +
                            std::to_string(*bad) + " at element " + std::to_string(bad - data.begin()) +
                            "; a non-finite value is never saved");
    }
    ByteWriter out;
    out.str(checkpoint_tag);
    out.u64(checkpoint_version);
    out.u64(parameters.size());
    for (const auto& p : parameters) {
        out.str(p.name());
        out.u64(p.shape().rank());
        for (std::size_t d : p.shape()) out.u64(d);
        const auto& data = p.data();
        out.floats(std::span<const float>(data.data(), data.size()));
    }
    out.u64(learner ? 1 : 0);
    if (learner) {
        ByteWriter state;
        learner->save_state(state);
        out.str(state.bytes());
    }
    out.u64(position.epoch);
    out.u64(position.minibatch);
    out.u64(position.samples);
    out.str(position.reader_state);
    out.u64(extras.size());
    for (const auto& [key, value] : extras) {
        out.str(key);
        out.str(value);
    }
    write_checked_file(path, out.bytes());
}

Checkpoint load_checkpoint(const std::string& path, const std::vector<Parameter>& parameters, Learner* learner,
                           const std::function<void(const CheckpointExtras&)>& check_extras) {
    const std::string payload = read_checked_file(path);
    const std::string where = "checkpoint '" + path + "'";
    ByteReader in(payload, where);

    // Parse the whole file first: nothing in the model changes unless all of it is good.
    if (in.remaining() < 8 || in.str() != checkpoint_tag)
        throw DataError(where + " is a loom file but not a checkpoint");
    if (const auto v = in.u64(); v != checkpoint_version)
        throw DataError(where + " has checkpoint version " + std::to_string(v) + "; this build reads " +
                        std::to_string(checkpoint_version));
    const std::uint64_t count = in.u64();
    if (count > in.remaining() / min_parameter_bytes)
        throw DataError(where + ": parameter count " + std::to_string(count) + " is impossible in the " +
                        std::to_string(in.remaining()) + " bytes left");
    std::vector<StoredParameter> stored(count);
    for (auto& s : stored) {
        s.name = in.str();
        const std::uint64_t rank = in.u64();
        if (rank > max_rank)
            throw DataError(where + ": parameter " + quoted_field(s.name) + " has rank " + std::to_string(rank) +
                            " (at most " + std::to_string(max_rank) + ")");
        std::vector<std::size_t> dims(rank);
        std::uint64_t elements = 1;  // checked here: Shape::size() would wrap around silently
        for (auto& d : dims) {
            d = in.u64();
            if (elements != 0 && d > in.remaining() / sizeof(float) / elements)
                throw DataError(where + ": parameter " + quoted_field(s.name) + " has a dimension of " +
                                std::to_string(d) + ", more values than the file holds");
            elements *= d;
        }
        s.shape = Shape(std::move(dims));
        s.values = in.floats();
        if (s.values.size() != s.shape.size())
            throw DataError(where + ": parameter " + describe(s.name, s.shape) + " holds " +
                            std::to_string(s.values.size()) + " values");
    }
    const bool has_learner = in.u64() != 0;
    const std::string learner_state = has_learner ? in.str() : std::string();
    Checkpoint result;
    result.position.epoch = in.u64();
    result.position.minibatch = in.u64();
    result.position.samples = in.u64();
    result.position.reader_state = in.str();
    const std::uint64_t num_extras = in.u64();
    if (num_extras > in.remaining() / min_extra_bytes)
        throw DataError(where + ": extra record count " + std::to_string(num_extras) + " is impossible in the " +
                        std::to_string(in.remaining()) + " bytes left");
    for (std::uint64_t i = 0; i < num_extras; ++i) {
        std::string key = in.str();
        if (result.extras.count(key) != 0)
            throw DataError(where + ": extra record " + quoted_field(key) + " appears twice");
        result.extras[std::move(key)] = in.str();
    }
    if (!in.done()) throw DataError(where + " has unexpected bytes after its last record");

    // The model must be the one that was saved.
    if (stored.size() != parameters.size())
        throw UserError(where + " holds " + std::to_string(stored.size()) + " parameters, the model passed has " +
                        std::to_string(parameters.size()) + "; build the same model as when it was saved");
    for (std::size_t i = 0; i < stored.size(); ++i) {
        const auto& p = parameters[i];
        if (stored[i].name != p.name() || stored[i].shape != p.shape())
            throw UserError(where + ": parameter #" + std::to_string(i) + " is " +
                            describe(stored[i].name, stored[i].shape) + " in the file but " +
                            describe(p.name(), p.shape()) + " in the model");
    }
    if (check_extras) check_extras(result.extras);
    if (learner) {
        if (!has_learner) throw UserError(where + " holds no learner state; pass no learner to load parameters only");
        ByteReader state(learner_state, where + " (learner state)");
        learner->load_state(state);  // checks everything before it changes the learner
    }
    for (std::size_t i = 0; i < stored.size(); ++i)
        std::copy(stored[i].values.begin(), stored[i].values.end(), parameters[i].data().data());
    return result;
}

}  // namespace loom
