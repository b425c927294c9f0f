// A main for the fuzz targets without libFuzzer: runs LLVMFuzzerTestOneInput once on every file
// named on the command line or found (recursively) in a directory named there, so a seed corpus
// or a saved crash input becomes a regression test. Exits non-zero when a path holds no input.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

void replay(const std::filesystem::path& file) {
    std::ifstream in(file, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
}

}  // namespace

int main(int argc, char** argv) {
    std::size_t count = 0;
    for (int i = 1; i < argc; ++i) {
        const std::filesystem::path path(argv[i]);
        std::vector<std::filesystem::path> files;
        if (std::filesystem::is_directory(path)) {
            for (const auto& entry : std::filesystem::recursive_directory_iterator(path))
                if (entry.is_regular_file()) files.push_back(entry.path());
        } else if (std::filesystem::is_regular_file(path)) {
            files.push_back(path);
        }
        if (files.empty()) {
            std::cerr << "replay: no input in '" << path.string() << "'\n";
            return 1;
        }
        for (const auto& f : files) replay(f);
        count += files.size();
    }
    std::cout << "replayed " << count << " inputs without a finding\n";
    return 0;
}
