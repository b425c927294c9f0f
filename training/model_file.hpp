#pragma once
/// \file
/// A trained model in one file: its parameters by name (not by position, so a model rebuilt in code
/// with its parameters created in another order still loads) with their shapes and precisions, plus the caller's
/// named records (vocabulary, settings, anything a program needs to rebuild the graph). The file is
/// a checked file (core/serialization.hpp: written under a temporary name and renamed, checksummed):
/// a truncated or corrupted file is a DataError, never a model with garbage in it.
///
///   save_model_file("m.loom", "qa_similarity", model.parameters(),
///                   {{"settings", settings_record({{"hidden", 64}})}, {"vocabulary", "..."}});
///   ModelFile f = read_model_file("m.loom", "qa_similarity");   // then build the graph from
///   f.setting("hidden"), f.record("vocabulary"), ...
///   assign_parameters(f, model.parameters());
#include <map>
#include <string>
#include <vector>

#include <xtensor/xarray.hpp>

#include "graph/variable.hpp"

namespace loom {

/// A model file as read_model_file reads it: its kind, records and parameters by name.
struct ModelFile {
    std::string path;                            ///< where it was read from, for messages
    std::string kind;                            ///< which program's model, e.g. "qa_similarity"
    std::map<std::string, std::string> records;  ///< the caller's records
    /// By name, with their shapes, each in the precision it was saved in.
    std::map<std::string, ByDType<Array>> parameters;

    /// The record `key`; a DataError naming the file and the key when it has none.
    const std::string& record(const std::string& key) const;
    /// A number of the "settings" record (written by settings_record); a DataError naming the file
    /// and the name when the record or the name is missing, or its value is not a number,
    /// and when it is not finite (nan, inf).
    double setting(const std::string& name) const;
    /// True when the "settings" record holds `name` (for a setting that older files lack).
    bool has_setting(const std::string& name) const;
    /// The same, a DataError naming the file and the setting unless min <= value <= max.
    double setting(const std::string& name, double min, double max) const;
    /// A size or a count: a DataError unless a whole number from min to max (never a double
    /// converted to size_t out of range, which is undefined: -1, nan, 1e30).
    std::size_t whole_setting(const std::string& name, std::size_t min, std::size_t max) const;
    /// The record `key` (written by settings_record) as the "settings" of a file of no parameters,
    /// to read with the checked readers above: a model's own settings beside the caller's.
    ModelFile settings_in(const std::string& key) const;
    /// A DataError unless the parameters hold `wanted` numbers in all: a loader checks what its
    /// settings make before making it, so that a file claiming huge sizes over small parameters
    /// is refused instead of allocated.
    void check_parameter_count(double wanted) const;
};

/// Numbers a program needs to rebuild its graph (sizes, weights), as the text of a "settings"
/// record: "name value" pairs, each value with 17 significant digits (a double read back exactly).
/// Throws UserError naming a setting that is not finite.
std::string settings_record(const std::map<std::string, double>& settings);

/// Throws UserError for parameters without a name or with the same name twice (they could not be
/// told apart on loading), for a NaN or infinite value (naming the parameter and element; nothing
/// is written), for a `path` that is a directory, a device, a FIFO or a socket, and for a file that
/// cannot be written. The file is written atomically (a temporary
/// renamed into place), so a failed save leaves the previous file.
void save_model_file(const std::string& path, const std::string& kind, const std::vector<Parameter>& parameters,
                     const std::map<std::string, std::string>& records = {});

/// Throws DataError for a missing, truncated or corrupted file, one that is not a model file, one
/// that is not a regular file (a FIFO, a device: refused by name, before opening), a parameter
/// whose shape holds more elements than the file, or a NaN or infinite value;
/// UserError when `expected_kind` is not empty and the file holds another kind of model.
ModelFile read_model_file(const std::string& path, const std::string& expected_kind = "");

/// Sets every parameter from the file's value of the same name. If any parameter is missing from the
/// file, any of the file's is not among `parameters`, or a shape differs, throws UserError listing
/// all of them, and nothing is changed. Each value is stored in the model parameter's precision: a
/// file saved in double loads into a float model (rounded, for inference) and the reverse (exact).
/// A double beyond float's range bound for a float parameter is a DataError naming the file, the
/// parameter, the value and its element, and nothing is changed.
void assign_parameters(const ModelFile& file, const std::vector<Parameter>& parameters);

}  // namespace loom
