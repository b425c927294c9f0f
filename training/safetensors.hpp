#pragma once
/// \file
/// Parameters in and out as safetensors, the file PyTorch and Hugging Face users exchange weights
/// in: 8 bytes (the header's size, little-endian), a JSON header naming each tensor's dtype, shape
/// and byte range, then the tensors' bytes. Parameters are stored by name, so a model written by a
/// PyTorch peer loads by its state dict's names ("gpt.layers.0.self_attn.q.W").
///
///   save_safetensors("m.safetensors", model.parameters(), {{"format", "pt"}});
///   const SafetensorsFile f = read_safetensors("m.safetensors");
///   assign_safetensors(f, model.parameters());
///
/// The reader is strict, for a file may come from anywhere: every tensor's bytes must lie inside the
/// data, match its shape and dtype exactly, and the tensors must cover the data without overlaps or
/// holes (as the format requires); a header above 100 MB is refused before it is read.
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <xtensor/xarray.hpp>

#include "graph/variable.hpp"

namespace loom {

/// One tensor of a safetensors file.
struct SafetensorsTensor {
    /// The dtype the file gives: "F32", "F64", "F16" or "BF16" (the ones loom reads).
    std::string dtype;
    /// The values: F32, F16 and BF16 as float (F16 and BF16 exactly), F64 as double.
    ByDType<Array> values;

    /// \return the tensor's shape, as the file gives it ({} for a scalar).
    std::vector<std::size_t> shape() const;
};

/// A safetensors file as read_safetensors reads it: its tensors by name and its "__metadata__".
struct SafetensorsFile {
    std::string path;                                  ///< where it was read from, for messages
    std::map<std::string, SafetensorsTensor> tensors;  ///< by name
    std::map<std::string, std::string> metadata;       ///< the header's "__metadata__" (empty if none)
};

/// Whether assign_safetensors accepts a file holding tensors the model has no parameter for (a
/// PyTorch state dict's buffers, a head the model leaves out).
enum class ExtraTensors {
    refuse,  ///< a UserError listing them (the default: a misspelt name is caught)
    ignore,  ///< they are left unused
};

/// Writes `parameters` to `path`, each under its name, float parameters as F32 and double ones as
/// F64, with `metadata` as the header's "__metadata__" (left out when empty). Throws UserError, before
/// anything is written, for a parameter without a name, two with the same name, a name or metadata
/// that is not UTF-8, a parameter named "__metadata__", a NaN or infinite value (naming the
/// parameter and the element), and a `path` that is a directory, a device, a FIFO or a socket. The
/// file is written atomically (a temporary renamed into place), so a failed save leaves the
/// previous file.
void save_safetensors(const std::string& path, const std::vector<Parameter>& parameters,
                      const std::map<std::string, std::string>& metadata = {});

/// Reads every tensor of the file. Throws DataError naming the file and what is wrong: a missing
/// file, one that is not a regular file (a FIFO, a device: refused by name, before opening), or any
/// file that is not a well-formed safetensors file (parse_safetensors lists the checks); a tensor of
/// a dtype loom does not read (integers, booleans, 8-bit floats) is named as such.
SafetensorsFile read_safetensors(const std::string& path);

/// The same on the bytes of a whole file in memory; `source` names them in messages. Throws
/// DataError for fewer than 8 bytes; a header size past the end or above 100 MB; a header that is
/// not a JSON object, or holds a name twice; a header holding a NUL byte, or anything but white
/// space after its JSON object (the format pads it with spaces), named with its offset; a tensor
/// entry without "dtype", "shape" and "data_offsets" of the right types, with an unknown dtype, a
/// shape entry that is not a whole number or whose product overflows, a rank above 8, data offsets
/// that are not [begin, end] with begin <= end inside the data, or a byte count other than its
/// elements times its dtype's size; tensors that overlap or leave bytes of the data unused; a
/// "__metadata__" that is not an object of strings. Its time grows in proportion to the header (one
/// pass checks it, one builds it).
SafetensorsFile parse_safetensors(std::string_view bytes, const std::string& source);

/// Sets each parameter from the file's tensor of the same name, converted to the parameter's
/// precision (F64 rounds into a float parameter). Throws UserError naming the file and listing every
/// parameter missing from the file, every tensor of another shape than its parameter, and (unless
/// `extra` is ExtraTensors::ignore) every tensor no parameter is named after; DataError for a tensor
/// holding NaN or an infinity (reading keeps them: a file may hold a mask of -inf; a parameter never
/// gets one), or an F64 value beyond float's range bound for a float parameter, naming the tensor,
/// the value and the element. Nothing is changed when it throws.
void assign_safetensors(const SafetensorsFile& file, const std::vector<Parameter>& parameters,
                        ExtraTensors extra = ExtraTensors::refuse);

}  // namespace loom
