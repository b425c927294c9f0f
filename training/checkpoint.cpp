#include "training/checkpoint.hpp"

#include <algorithm>
#include <cmath>

#include "core/errors.hpp"
#include "core/finite.hpp"
#include "core/serialization.hpp"
#include "training/learners.hpp"

namespace loom {

namespace {

constexpr const char* checkpoint_tag = "loom-checkpoint";
// Version 2 records each parameter's precision and keeps a double parameter's values in double;
// version 1 (float only) still loads.
constexpr std::uint64_t checkpoint_version = 2;

struct StoredParameter {
    std::string name;
    Shape shape;
    ByDType<VectorOf> values;  ///< in the precision it was saved in
    DType dtype() const { return dtype_held(values); }
};

template <class T>
void check_finite(const std::string& path, const Parameter& p, const xt::xarray<T>& data);

std::string describe(const std::string& name, const Shape& shape) {
    return (name.empty() ? std::string("'<unnamed>'") : quoted_field(name)) + " " + shape.str();
}

// A checkpoint never holds NaN or inf (save_checkpoint refuses them): one that does was damaged or
// made by hand, and loading it would train on from garbage.
template <class T>
void check_read_finite(const std::string& where, const StoredParameter& s, const std::vector<T>& values) {
    if (const std::string bad = first_non_finite<T>(values); !bad.empty())
        throw DataError(where + ": parameter " + describe(s.name, s.shape) + " holds " + bad +
                        "; a checkpoint holds finite values only");
}

// The bytes a record needs at the least, to reject an impossible count before allocating for it.
constexpr std::size_t min_parameter_bytes = 3 * sizeof(std::uint64_t);  // name, rank, value count
constexpr std::size_t min_extra_bytes = 2 * sizeof(std::uint64_t);      // key, value

}  // namespace

void save_checkpoint(const std::string& path, const std::vector<Parameter>& parameters, const Learner* learner,
                     const TrainingPosition& position, const CheckpointExtras& extras) {
    for (const auto& p : parameters) {
        if (p.dtype() == DType::f64)
            check_finite(path, p, p.data<double>());
        else
            check_finite(path, p, p.data<float>());
    }
    ByteWriter out;
    out.str(checkpoint_tag);
    out.u64(checkpoint_version);
    out.u64(parameters.size());
    for (const auto& p : parameters) {
        out.str(p.name());
        out.u64(p.shape().rank());
        for (std::size_t d : p.shape()) out.u64(d);
        if (p.dtype() == DType::f64) {
            out.u64(1);
            const auto& data = p.data<double>();
            out.doubles(std::span<const double>(data.data(), data.size()));
        } else {
            out.u64(0);
            const auto& data = p.data<float>();
            out.floats(std::span<const float>(data.data(), data.size()));
        }
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

namespace {

// A checkpoint file's records, read and checked before anything in the model changes.
struct CheckpointFile {
    std::vector<StoredParameter> parameters;
    bool has_learner = false;
    std::string learner_state;
    Checkpoint checkpoint;
};

// A count of records, refused when the bytes left cannot hold that many.
std::uint64_t read_count(ByteReader& in, const std::string& where, const std::string& records,
                         std::size_t min_record_bytes) {
    const std::uint64_t count = in.u64();
    if (count > in.remaining() / min_record_bytes)
        throw DataError(where + ": " + records + " count " + std::to_string(count) + " is impossible in the " +
                        std::to_string(in.remaining()) + " bytes left");
    return count;
}

std::uint64_t read_version(ByteReader& in, const std::string& where) {
    if (in.remaining() < 8 || in.str() != checkpoint_tag)
        throw DataError(where + " is a loom file but not a checkpoint");
    const std::uint64_t version = in.u64();
    if (version > checkpoint_version)
        throw DataError(where + " was written by a newer loom (version " + std::to_string(version) +
                        "); this loom reads checkpoint versions 1 to " + std::to_string(checkpoint_version) +
                        ": use a newer loom");
    if (version == 0) throw DataError(where + " has checkpoint version 0, which no loom writes");
    return version;
}

Shape read_shape(ByteReader& in, const std::string& where, const std::string& name) {
    const std::uint64_t rank = in.u64();
    if (rank > max_rank)
        throw DataError(where + ": parameter " + quoted_field(name) + " has rank " + std::to_string(rank) +
                        " (at most " + std::to_string(max_rank) + ")");
    std::vector<std::size_t> dims(rank);
    std::uint64_t elements = 1;  // checked here: Shape::size() would wrap around silently
    for (auto& d : dims) {
        d = in.u64();
        if (elements != 0 && d > in.remaining() / sizeof(float) / elements)
            throw DataError(where + ": parameter " + quoted_field(name) + " has a dimension of " + std::to_string(d) +
                            ", more values than the file holds");
        elements *= d;
    }
    return Shape(std::move(dims));
}

StoredParameter read_parameter(ByteReader& in, const std::string& where, std::uint64_t version) {
    StoredParameter s;
    s.name = in.str();
    s.shape = read_shape(in, where, s.name);
    const std::uint64_t tag = version >= 2 ? in.u64() : 0;
    if (tag > 1)
        throw DataError(where + ": parameter " + describe(s.name, s.shape) + " has an unknown precision tag " +
                        std::to_string(tag));
    if (tag == 1)
        s.values = in.doubles();
    else
        s.values = in.floats();
    const std::size_t held = std::visit([](const auto& v) { return v.size(); }, s.values);
    if (held != s.shape.size())
        throw DataError(where + ": parameter " + describe(s.name, s.shape) + " holds " + std::to_string(held) +
                        " values");
    std::visit([&](const auto& v) { check_read_finite(where, s, v); }, s.values);
    return s;
}

CheckpointExtras read_extras(ByteReader& in, const std::string& where) {
    const std::uint64_t num_extras = read_count(in, where, "extra record", min_extra_bytes);
    CheckpointExtras extras;
    for (std::uint64_t i = 0; i < num_extras; ++i) {
        std::string key = in.str();
        if (extras.count(key) != 0) throw DataError(where + ": extra record " + quoted_field(key) + " appears twice");
        extras[std::move(key)] = in.str();
    }
    return extras;
}

CheckpointFile read_checkpoint_file(const std::string& payload, const std::string& where) {
    ByteReader in(payload, where);
    const std::uint64_t version = read_version(in, where);
    const std::uint64_t count = read_count(in, where, "parameter", min_parameter_bytes);
    CheckpointFile file;
    file.parameters.reserve(count);
    for (std::uint64_t i = 0; i < count; ++i) file.parameters.push_back(read_parameter(in, where, version));
    file.has_learner = in.u64() != 0;
    if (file.has_learner) file.learner_state = in.str();
    TrainingPosition& position = file.checkpoint.position;
    position.epoch = in.u64();
    position.minibatch = in.u64();
    position.samples = in.u64();
    position.reader_state = in.str();
    file.checkpoint.extras = read_extras(in, where);
    if (!in.done()) throw DataError(where + " has unexpected bytes after its last record");
    return file;
}

// The model must be the one that was saved.
void check_same_model(const std::string& where, const std::vector<StoredParameter>& stored,
                      const std::vector<Parameter>& parameters) {
    if (stored.size() != parameters.size())
        throw UserError(where + " holds " + std::to_string(stored.size()) + " parameters, the model passed has " +
                        std::to_string(parameters.size()) + "; build the same model as when it was saved");
    for (std::size_t i = 0; i < stored.size(); ++i) {
        const auto& p = parameters[i];
        if (stored[i].name != p.name() || stored[i].shape != p.shape())
            throw UserError(where + ": parameter #" + std::to_string(i) + " is " +
                            describe(stored[i].name, stored[i].shape) + " in the file but " +
                            describe(p.name(), p.shape()) + " in the model");
        // Resuming is exact only in the precision the run was in; a conversion is the caller's act.
        if (stored[i].dtype() != p.dtype())
            throw UserError(where + ": parameter " + describe(p.name(), p.shape()) + " is " +
                            precision_name(stored[i].dtype()) + " in the file but " + precision_name(p.dtype()) +
                            " in the model; a checkpoint loads in the precision "
                            "it was saved in: call to_precision(parameters, DType::" +
                            (stored[i].dtype() == DType::f64 ? "f64" : "f32") +
                            ") before loading (and to_precision again after it to go on in the other one)");
    }
}

}  // namespace

Checkpoint load_checkpoint(const std::string& path, const std::vector<Parameter>& parameters, Learner* learner,
                           const std::function<void(const CheckpointExtras&)>& check_extras) {
    const std::string payload = read_checked_file(path);
    const std::string where = "checkpoint '" + path + "'";
    // Parse the whole file first: nothing in the model changes unless all of it is good.
    CheckpointFile file = read_checkpoint_file(payload, where);
    check_same_model(where, file.parameters, parameters);
    if (check_extras) check_extras(file.checkpoint.extras);
    if (learner) {
        if (!file.has_learner)
            throw UserError(where + " holds no learner state; pass no learner to load parameters only");
        ByteReader state(file.learner_state, where + " (learner state)");
        learner->load_state(state);  // checks everything before it changes the learner
    }
    for (std::size_t i = 0; i < file.parameters.size(); ++i)
        std::visit(
            [&]<class T>(const std::vector<T>& values) {
                std::copy(values.begin(), values.end(), parameters[i].data<T>().data());
            },
            file.parameters[i].values);
    return std::move(file.checkpoint);
}

namespace {
template <class T>
void check_finite(const std::string& path, const Parameter& p, const xt::xarray<T>& data) {
    if (const std::string bad = first_non_finite<T>({data.data(), data.size()}); !bad.empty())
        throw UserError("save_checkpoint '" + path + "': parameter " + describe(p.name(), p.shape()) + " holds " + bad +
                        "; a non-finite value is never saved");
}
}  // namespace

}  // namespace loom
