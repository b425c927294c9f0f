#include "core/data_text.hpp"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/errors.hpp"

namespace loom::data_text {

void fail(const std::string& path, std::size_t line, const std::string& reason) {
    throw DataError(path + ":" + std::to_string(line) + ": " + reason);
}

std::ifstream open_for_reading(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw DataError("cannot open data file '" + path + "': " + std::strerror(errno));
    return in;
}

bool read_line(std::istream& in, std::string& line) {
    if (!std::getline(in, line)) return false;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return true;
}

bool parse_float(std::string_view token, float& out) {
    // from_chars rejects a leading '+', which numeric text files do contain.
    if (token.size() > 1 && token.front() == '+') token.remove_prefix(1);
    if (token.empty()) return false;
    const char* end = token.data() + token.size();
    auto [ptr, ec] = std::from_chars(token.data(), end, out);
    return ec == std::errc() && ptr == end && std::isfinite(out);
}

bool parse_index(std::string_view token, std::size_t& out) {
    if (token.empty()) return false;
    const char* end = token.data() + token.size();
    auto [ptr, ec] = std::from_chars(token.data(), end, out);
    return ec == std::errc() && ptr == end;
}

bool is_blank(std::string_view s) { return s.find_first_not_of(" \t") == std::string_view::npos; }

std::vector<std::string> split_whitespace(std::string_view s) {
    std::vector<std::string> pieces;
    std::size_t pos = 0;
    while (pos < s.size()) {
        const std::size_t begin = s.find_first_not_of(" \t", pos);
        if (begin == std::string_view::npos) break;
        std::size_t end = s.find_first_of(" \t", begin);
        if (end == std::string_view::npos) end = s.size();
        pieces.emplace_back(s.substr(begin, end - begin));
        pos = end;
    }
    return pieces;
}

std::string ascii_lower(std::string_view s) {
    std::string out(s);
    for (char& c : out)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return out;
}

void write_text_atomically(const std::string& path, const std::string& text) {
    const std::string tmp = path + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) throw UserError("cannot write '" + tmp + "': " + std::strerror(errno));
        out.write(text.data(), static_cast<std::streamsize>(text.size()));
        out.flush();
        if (!out) {
            std::remove(tmp.c_str());
            throw UserError("cannot write '" + tmp + "' (disk full?)");
        }
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        const std::string why = std::strerror(errno);
        std::remove(tmp.c_str());
        throw UserError("cannot rename '" + tmp + "' to '" + path + "': " + why);
    }
}

}  // namespace loom::data_text
