// Fuzz target: the CTF reader over arbitrary text, then every accessor on what it read. A
// loom::Error (DataError "file:line: ...") is the expected answer to bad input; anything else
// escaping, or a sanitizer report, is a finding.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "core/errors.hpp"
#include "data/ctf.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    // Streams of every kind: sparse one-hot words, a small dense vector and a wide sparse one.
    static const std::vector<loom::CtfStreamConfig> streams = {
        {"q", 50, true}, {"x", 3, false}, {"label", 1, false}, {"wide", 1u << 20, true}};
    std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
    try {
        const loom::CtfData ctf = loom::parse_ctf(in, "fuzz.ctf", streams);
        for (std::size_t s = 0; s < ctf.size(); ++s) {
            (void)ctf.dense(s, "x");
            (void)ctf.dense(s, "q");
            try {
                (void)ctf.indices(s, "q");
            } catch (const loom::DataError&) {
                // a sample with other than one entry: reported, not a finding
            }
        }
    } catch (const loom::Error&) {
    }
    return 0;
}
