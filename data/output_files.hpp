#pragma once
/// \file
/// The files a program writes: checked before any work starts, written so that no reader ever sees
/// half of one. A program that trains for hours checks every output it was given first:
///
///   check_outputs({{save_path, "--save"}, {plot_dir, "--plot", true}}, {{train_path, "--train"}});
///   ...  // hours of training
///   write_text_atomically(plot_dir + "/curve.svg", svg);
///
/// so a mistyped directory or a model path that names the training data is refused at once, by the
/// option that gave it, and nothing the user owns is overwritten by mistake.
#include <string>
#include <vector>

namespace loom {

/// Writes text to `path` through a temporary file renamed into place, so an interrupted save never
/// leaves a truncated file under the real name (core/serialization.hpp: write_file_atomically,
/// which also removes temporaries that killed writers left). Throws UserError on failure, and before
/// writing when `path` is a directory, a device, a FIFO or a socket (not_replaceable).
void write_text_atomically(const std::string& path, const std::string& text);
/// Throws UserError "`what` `path`: cannot write there: ..." unless every name in `path` holds at
/// most 255 bytes, `path`'s directory exists and this process may create files in it: a temporary
/// file named as write_text_atomically names its own is created there and removed at once, so a file
/// system that refuses files (/proc, a read-only mount) or a name too long is known before any work.
void check_writable(const std::string& path, const std::string& what);

/// A path a program was given and the option that gave it, for messages ("--save m.loom").
struct FileOption {
    std::string path;    ///< empty: the option was not given
    std::string option;  ///< "--save"
    /// An output only: the program creates its directory (a --plot DIR) after the checks, so a missing
    /// directory is fine where the nearest existing one above it is writable.
    bool creates_directory = false;
    /// The program chose this file's name (alignment_1.svg in a --plot DIR), so the user never asked
    /// for exactly this file: an existing one is theirs and is refused, never replaced.
    bool named_by_program = false;
};

/// Checks a run's outputs before any work, so that hours of training never end in a failed write
/// and nothing the user owns is overwritten by mistake. Throws UserError naming the option and the
/// path of the first output that is: an input of the run (the same file by std::filesystem::equivalent
/// where both exist, else the same absolute path once symbolic links are resolved), another output of
/// the run or the directory another output is written into, an existing directory, a device, FIFO
/// or socket, an existing file of a name the program chose (FileOption::named_by_program), or not
/// writable (check_writable). Nothing is left written; outputs with an empty path are skipped.
void check_outputs(const std::vector<FileOption>& outputs, const std::vector<FileOption>& inputs);

}  // namespace loom
