#include "plots.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "core/data_text.hpp"

namespace plots {

namespace {

std::string escaped(const std::string& s) {
    std::string out;
    for (char c : s)
        out += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : c == '"' ? "&quot;" : std::string(1, c);
    return out;
}

std::string fmt(const char* f, double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, f, v);
    return buf;
}

// One panel: axes at (x, y) of size w x h, a polyline with dots per series, y from lo to hi.
void panel(std::ostream& svg, double x, double y, double w, double h, const std::string& title,
           const std::vector<std::pair<std::string, std::vector<double>>>& series) {
    double lo = 1e300, hi = -1e300;
    for (const auto& [name, v] : series)
        for (double e : v) lo = std::min(lo, e), hi = std::max(hi, e);
    const double pad = std::max(1e-3, (hi - lo) * 0.1);
    lo -= pad, hi += pad;
    const std::size_t n = series[0].second.size();
    auto px = [&](std::size_t i) {
        return x + (n > 1 ? w * static_cast<double>(i) / static_cast<double>(n - 1) : w / 2);
    };
    auto py = [&](double v) { return y + h - h * (v - lo) / (hi - lo); };
    svg << "<text x='" << x + w / 2 << "' y='" << y - 12 << "' text-anchor='middle' font-weight='bold'>" << title
        << "</text>\n<rect x='" << x << "' y='" << y << "' width='" << w << "' height='" << h
        << "' fill='none' stroke='#999'/>\n";
    for (int k = 0; k <= 4; ++k) {
        const double v = lo + (hi - lo) * k / 4;
        svg << "<text x='" << x - 6 << "' y='" << py(v) + 4 << "' text-anchor='end'>" << fmt("%.3f", v) << "</text>\n";
    }
    for (std::size_t i = 0; i < n; ++i)
        svg << "<text x='" << px(i) << "' y='" << y + h + 18 << "' text-anchor='middle'>" << i + 1 << "</text>\n";
    svg << "<text x='" << x + w / 2 << "' y='" << y + h + 36 << "' text-anchor='middle'>epoch</text>\n";
    const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c"};
    for (std::size_t s = 0; s < series.size(); ++s) {
        svg << "<polyline fill='none' stroke-width='2' stroke='" << colors[s] << "' points='";
        for (std::size_t i = 0; i < n; ++i) svg << px(i) << "," << py(series[s].second[i]) << " ";
        svg << "'/>\n";
        for (std::size_t i = 0; i < n; ++i)
            svg << "<circle r='3.5' fill='" << colors[s] << "' cx='" << px(i) << "' cy='" << py(series[s].second[i])
                << "'/>\n";
        svg << "<text x='" << x + 8 << "' y='" << y + 16 + 16 * s << "' fill='" << colors[s] << "'>" << series[s].first
            << "</text>\n";
    }
}

std::string svg_open(double w, double h) {
    std::ostringstream s;
    s << "<svg xmlns='http://www.w3.org/2000/svg' width='" << w << "' height='" << h
      << "' font-family='Helvetica, Arial, sans-serif' font-size='12'>\n<rect width='100%' height='100%' "
         "fill='white'/>\n";
    return s.str();
}

// A row of cells, one per token, shaded by its weight (darkest: the row's largest), the word below.
void strip(std::ostream& svg, double y, const std::string& title, const std::vector<std::string>& words,
           const xt::xarray<float>& weights) {
    const double top = *std::max_element(weights.begin(), weights.end());
    svg << "<text x='10' y='" << y - 8 << "' font-weight='bold'>" << escaped(title) << "</text>\n";
    for (std::size_t i = 0; i < words.size(); ++i) {
        const double v = top > 0 ? weights(i, 0) / top : 0;
        const int r = static_cast<int>(255 - 220 * v), g = static_cast<int>(255 - 150 * v);
        const double x = 10 + 30.0 * static_cast<double>(i);
        svg << "<rect x='" << x << "' y='" << y << "' width='28' height='28' stroke='#ccc' fill='rgb(" << r << "," << g
            << ",255)'><title>" << escaped(words[i]) << " " << weights(i, 0) << "</title></rect>\n"
            << "<text x='" << x + 14 << "' y='" << y + 18 << "' font-size='9' text-anchor='middle' fill='"
            << (v > 0.6 ? "white" : "#333") << "'>" << fmt("%.2f", weights(i, 0)) << "</text>\n"
            << "<text transform='translate(" << x + 18 << "," << y + 36 << ") rotate(60)'>" << escaped(words[i])
            << "</text>\n";
    }
}

}  // namespace

void write_curve(const std::string& path, const std::vector<Epoch>& epochs) {
    std::vector<double> loss, held, dev;
    for (const auto& e : epochs) loss.push_back(e.loss), held.push_back(e.held_out_map), dev.push_back(e.dev_map);
    std::ostringstream svg;
    svg << svg_open(760, 320);
    panel(svg, 70, 40, 280, 220, "training loss (hinge)", {{"loss", loss}});
    panel(svg, 450, 40, 280, 220, "MAP after each epoch", {{"held-out questions", held}, {"dev file", dev}});
    svg << "</svg>\n";
    loom::data_text::write_text_atomically(path, svg.str());
}

void write_attention(const std::string& path, const Attention& a) {
    const std::size_t longest = std::max(a.pair.question.size(), a.pair.answer.size());
    std::ostringstream svg;
    svg << svg_open(40 + 30.0 * static_cast<double>(longest), 300);
    strip(svg, 30, "question: attention weight per token", a.pair.question, a.question);
    strip(svg, 170, std::string("answer sentence (label ") + (a.pair.label ? "1, true" : "0, wrong") + ")",
          a.pair.answer, a.answer);
    svg << "</svg>\n";
    loom::data_text::write_text_atomically(path, svg.str());
}

}  // namespace plots
