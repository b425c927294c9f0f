#pragma once
/// \file
/// Small pictures as SVG text, so a program can show a training curve or per-token weights without an
/// image library or fonts: any browser or `rsvg-convert` renders them, words included. Written with
/// data/output_files.hpp:
///
///   write_text_atomically("curve.svg", svg::line_charts({{"loss", "epoch", {{"train", losses}}}}));
#include <string>
#include <vector>

namespace loom::svg {

/// One line of a chart.
struct Series {
    std::string name;       ///< in the legend
    std::vector<double> y;  ///< at x = 1, 2, ...
};
/// One chart of line_charts: its lines share the axes.
struct Chart {
    std::string title, x_label;  ///< x_label: under the x axis
    std::vector<Series> series;  ///< drawn in blue, red, green, ... on one y range
};
/// \var Chart::title
/// Above the chart.

/// The charts side by side in one picture. Throws UserError for a chart without points or for series
/// of different lengths in one chart.
std::string line_charts(const std::vector<Chart>& charts);

/// One row of heat_rows.
struct HeatRow {
    std::string title;                ///< above the row
    std::vector<std::string> labels;  ///< written under the cells, e.g. a sentence's words
    std::vector<double> values;       ///< one per label
};
/// One row of cells per HeatRow, each cell shaded from the row's smallest value (white) to its
/// largest (dark blue) and showing its value. Throws UserError when labels and values differ in number.
std::string heat_rows(const std::vector<HeatRow>& rows);

/// A matrix of cells: values[r][c] at row r (labelled row_labels[r], on the left) and column c
/// (column_labels[c], on top), shaded from 0 (white) to the largest value (dark blue), e.g. an
/// attention alignment (a row per output step, a column per input). Throws UserError when the
/// numbers of labels and values disagree or a value is negative or not finite.
std::string heat_map(const std::string& title, const std::vector<std::string>& row_labels,
                     const std::vector<std::string>& column_labels, const std::vector<std::vector<double>>& values);

}  // namespace loom::svg
