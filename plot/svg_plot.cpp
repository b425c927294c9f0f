#include "plot/svg_plot.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/errors.hpp"

namespace loom::svg {

namespace {

std::string escaped(const std::string& s) {
    std::string out;
    for (char c : s)
        out += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : c == '\'' ? "&apos;" : std::string(1, c);
    return out;
}

std::string number(const char* format, double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, format, v);
    return buf;
}

std::string open(double width, double height) {
    std::ostringstream s;
    s << "<svg xmlns='http://www.w3.org/2000/svg' width='" << width << "' height='" << height
      << "' font-family='Helvetica, Arial, sans-serif' font-size='12'>\n<rect width='100%' height='100%' "
         "fill='white'/>\n";
    return s.str();
}

// One chart with its axes' top left corner at (x, y), w x h, the y range padded by a tenth (not
// below 0 for values that are not), its ticks written with 4 significant digits.
void chart(std::ostream& svg, double x, double y, double w, double h, const Chart& c) {
    const std::size_t n = c.series.empty() ? 0 : c.series[0].y.size();
    if (n == 0) throw UserError("svg::line_charts: chart '" + c.title + "' has no points");
    double lo = 1e300, hi = -1e300;
    for (const auto& s : c.series) {
        if (s.y.size() != n)
            throw UserError("svg::line_charts: in chart '" + c.title + "', series '" + s.name + "' has " +
                            std::to_string(s.y.size()) + " points, the first has " + std::to_string(n));
        for (double v : s.y) lo = std::min(lo, v), hi = std::max(hi, v);
    }
    const double pad = std::max(1e-3, (hi - lo) * 0.1);
    // A quantity that is never negative (a loss, a rate, memory) gets no negative part of its axis.
    lo = lo >= 0 && lo - pad < 0 ? 0.0 : lo - pad;
    hi += pad;
    auto px = [&](std::size_t i) {
        return x + (n > 1 ? w * static_cast<double>(i) / static_cast<double>(n - 1) : w / 2);
    };
    auto py = [&](double v) { return y + h - h * (v - lo) / (hi - lo); };
    svg << "<text x='" << x + w / 2 << "' y='" << y - 12 << "' text-anchor='middle' font-weight='bold'>"
        << escaped(c.title) << "</text>\n<rect x='" << x << "' y='" << y << "' width='" << w << "' height='" << h
        << "' fill='none' stroke='#999'/>\n";
    for (int k = 0; k <= 4; ++k) {
        const double v = lo + (hi - lo) * k / 4;
        svg << "<text x='" << x - 6 << "' y='" << py(v) + 4 << "' text-anchor='end'>" << number("%.4g", v)
            << "</text>\n";
    }
    for (std::size_t i = 0; i < n; ++i)
        svg << "<text x='" << px(i) << "' y='" << y + h + 18 << "' text-anchor='middle'>" << i + 1 << "</text>\n";
    svg << "<text x='" << x + w / 2 << "' y='" << y + h + 36 << "' text-anchor='middle'>" << escaped(c.x_label)
        << "</text>\n";
    const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"};
    for (std::size_t s = 0; s < c.series.size(); ++s) {
        const char* color = colors[s % 5];
        svg << "<polyline fill='none' stroke-width='2' stroke='" << color << "' points='";
        for (std::size_t i = 0; i < n; ++i) svg << px(i) << "," << py(c.series[s].y[i]) << " ";
        svg << "'/>\n";
        for (std::size_t i = 0; i < n; ++i)
            svg << "<circle r='3.5' fill='" << color << "' cx='" << px(i) << "' cy='" << py(c.series[s].y[i])
                << "'/>\n";
        // The legend goes under the chart, where no line can cross it.
        svg << "<text x='" << x << "' y='" << y + h + 58 + 16 * static_cast<double>(s) << "' fill='" << color
            << "'>&#9632; " << escaped(c.series[s].name) << "</text>\n";
    }
}

}  // namespace

std::string line_charts(const std::vector<Chart>& charts) {
    std::ostringstream svg;
    svg << open(40 + 380 * static_cast<double>(charts.size()), 360);
    for (std::size_t i = 0; i < charts.size(); ++i)
        chart(svg, 70 + 380 * static_cast<double>(i), 40, 280, 220, charts[i]);
    svg << "</svg>\n";
    return svg.str();
}

std::string heat_rows(const std::vector<HeatRow>& rows) {
    std::size_t longest = 0;
    for (const auto& r : rows) {
        if (r.labels.size() != r.values.size())
            throw UserError("svg::heat_rows: row '" + r.title + "' has " + std::to_string(r.labels.size()) +
                            " labels and " + std::to_string(r.values.size()) + " values");
        longest = std::max(longest, r.labels.size());
    }
    std::ostringstream svg;
    svg << open(100 + 30 * static_cast<double>(longest), 30 + 150 * static_cast<double>(rows.size()));
    for (std::size_t k = 0; k < rows.size(); ++k) {
        const HeatRow& r = rows[k];
        const double y = 30 + 150 * static_cast<double>(k);
        const auto [lo_it, hi_it] = std::minmax_element(r.values.begin(), r.values.end());
        const double lo = r.values.empty() ? 0 : *lo_it, hi = r.values.empty() ? 0 : *hi_it;
        svg << "<text x='10' y='" << y - 8 << "' font-weight='bold'>" << escaped(r.title) << "</text>\n";
        for (std::size_t i = 0; i < r.values.size(); ++i) {
            const double v = hi > lo ? (r.values[i] - lo) / (hi - lo) : 0.5;
            const int red = static_cast<int>(255 - 220 * v), green = static_cast<int>(255 - 150 * v);
            const double x = 10 + 30 * static_cast<double>(i);
            svg << "<rect x='" << x << "' y='" << y << "' width='28' height='28' stroke='#ccc' fill='rgb(" << red << ","
                << green << ",255)'/>\n<text x='" << x + 14 << "' y='" << y + 18
                << "' font-size='9' text-anchor='middle' fill='" << (v > 0.6 ? "white" : "#333") << "'>"
                << number("%.2f", r.values[i]) << "</text>\n<text transform='translate(" << x + 18 << "," << y + 36
                << ") rotate(60)'>" << escaped(r.labels[i]) << "</text>\n";
        }
    }
    svg << "</svg>\n";
    return svg.str();
}

std::string heat_map(const std::string& title, const std::vector<std::string>& row_labels,
                     const std::vector<std::string>& column_labels, const std::vector<std::vector<double>>& values) {
    if (values.size() != row_labels.size())
        throw UserError("svg::heat_map '" + title + "': " + std::to_string(row_labels.size()) + " row labels for " +
                        std::to_string(values.size()) + " rows");
    double hi = 0;
    for (std::size_t r = 0; r < values.size(); ++r) {
        if (values[r].size() != column_labels.size())
            throw UserError("svg::heat_map '" + title + "': row " + std::to_string(r) + " has " +
                            std::to_string(values[r].size()) + " values for " + std::to_string(column_labels.size()) +
                            " columns");
        for (double v : values[r]) {
            if (!(v >= 0) || !std::isfinite(v))
                throw UserError("svg::heat_map '" + title + "': values must be finite and at least 0, not " +
                                number("%g", v));
            hi = std::max(hi, v);
        }
    }
    const double cell = 30, left = 60, top = 56;
    std::ostringstream svg;
    svg << open(std::max(left + cell * static_cast<double>(column_labels.size()) + 20, 8.0 * double(title.size()) + 20),
                top + cell * static_cast<double>(row_labels.size()) + 10);
    svg << "<text x='10' y='20' font-weight='bold'>" << escaped(title) << "</text>\n";
    for (std::size_t c = 0; c < column_labels.size(); ++c)
        svg << "<text x='" << left + cell * (double(c) + 0.5) << "' y='" << top - 8 << "' text-anchor='middle'>"
            << escaped(column_labels[c]) << "</text>\n";
    for (std::size_t r = 0; r < row_labels.size(); ++r) {
        const double y = top + cell * static_cast<double>(r);
        svg << "<text x='" << left - 6 << "' y='" << y + 19 << "' text-anchor='end'>" << escaped(row_labels[r])
            << "</text>\n";
        for (std::size_t c = 0; c < column_labels.size(); ++c) {
            const double v = hi > 0 ? values[r][c] / hi : 0;
            const int red = static_cast<int>(255 - 220 * v), green = static_cast<int>(255 - 150 * v);
            const double x = left + cell * static_cast<double>(c);
            svg << "<rect x='" << x << "' y='" << y << "' width='" << cell - 2 << "' height='" << cell - 2
                << "' stroke='#ccc' fill='rgb(" << red << "," << green << ",255)'/>\n<text x='" << x + 14 << "' y='"
                << y + 18 << "' font-size='9' text-anchor='middle' fill='" << (v > 0.6 ? "white" : "#333") << "'>"
                << number("%.2f", values[r][c]) << "</text>\n";
        }
    }
    svg << "</svg>\n";
    return svg.str();
}

}  // namespace loom::svg
