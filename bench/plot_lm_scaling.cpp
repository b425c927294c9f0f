// Draws how the language model's costs grow, from the rows bench/compare_lm --csv writes: for each
// sweep in the file (configurations named block-N or width-N), at each thread count, the median
// training tokens/s of loom and of each PyTorch engine, loom / engine (the ratio of the medians), and
// each engine's median peak RSS, as three charts side by side (plot/svg_plot.hpp, as the samples
// draw) in a picture of its own, PREFIX_SWEEP_THREADSt.svg:
//
//   build/bench/plot_lm_scaling --csv sweep.csv --out docs/images/lm_scaling
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/errors.hpp"
#include "data/output_files.hpp"
#include "plot/svg_plot.hpp"

using namespace loom;

namespace {

struct Run {
    std::string sweep, engine;  // sweep: "block" or "width"
    std::size_t size = 0, threads = 0;
    std::string kind;  // train or generate
    double rate = 0, rss = 0;
};

std::vector<std::string> split(const std::string& line) {
    std::vector<std::string> cells;
    std::stringstream in(line);
    for (std::string cell; std::getline(in, cell, ',');) cells.push_back(cell);
    return cells;
}

double number(const std::string& text, const std::string& where) {
    try {
        std::size_t used = 0;
        const double x = std::stod(text, &used);
        if (used == text.size()) return x;
    } catch (const std::exception&) {
    }
    throw DataError(where + ": '" + text + "' is not a number");
}

// The sweep runs of compare_lm's CSV (its header names the columns; other configurations are skipped).
std::vector<Run> read_runs(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw UserError(path + ": cannot be read");
    std::string line;
    if (!std::getline(in, line)) throw DataError(path + ": empty; expected compare_lm --csv's rows");
    const auto header = split(line);
    std::map<std::string, std::size_t> column;
    for (std::size_t i = 0; i < header.size(); ++i) column[header[i]] = i;
    for (const char* name : {"config", "threads", "engine", "kind", "rate", "peak_rss_mib"})
        if (!column.count(name)) throw DataError(path + ":1: no column '" + name + "' (compare_lm --csv writes it)");
    std::vector<Run> runs;
    for (std::size_t number_of_line = 2; std::getline(in, line); ++number_of_line) {
        const std::string where = path + ":" + std::to_string(number_of_line);
        const auto cells = split(line);
        if (cells.size() != header.size())
            throw DataError(where + ": " + std::to_string(cells.size()) + " cells; the header has " +
                            std::to_string(header.size()));
        const std::string& config = cells[column["config"]];
        const auto dash = config.find('-');
        if (dash == std::string::npos) continue;
        Run r;
        r.sweep = config.substr(0, dash);
        r.engine = cells[column["engine"]];
        if (r.sweep != "block" && r.sweep != "width") continue;
        r.size = static_cast<std::size_t>(number(config.substr(dash + 1), where));
        r.threads = static_cast<std::size_t>(number(cells[column["threads"]], where));
        r.kind = cells[column["kind"]];
        r.rate = number(cells[column["rate"]], where);
        r.rss = number(cells[column["peak_rss_mib"]], where);
        runs.push_back(r);
    }
    if (runs.empty()) throw DataError(path + ": no row of a block-N or width-N configuration (compare_lm --sweep)");
    return runs;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"Charts of compare_lm --sweep's rows: training tokens/s, loom / PyTorch and peak RSS"};
    std::string csv_path, prefix;
    app.add_option("--csv", csv_path, "compare_lm --csv's file")->required();
    app.add_option("--out", prefix, "the pictures' path up to _SWEEP_THREADSt.svg")->required();
    CLI11_PARSE(app, argc, argv);
    try {
        const auto runs = read_runs(csv_path);
        std::set<std::pair<std::string, std::size_t>> panels;  // (sweep, threads)
        for (const Run& r : runs) panels.insert({r.sweep, r.threads});
        std::size_t written = 0;
        for (const auto& [sweep, threads] : panels) {
            std::set<std::size_t> sizes;
            std::set<std::string> engines;
            std::map<std::tuple<std::size_t, std::string>, std::vector<double>> rate, rss;
            for (const Run& r : runs) {
                if (r.sweep != sweep || r.threads != threads || r.kind != "train") continue;
                sizes.insert(r.size);
                engines.insert(r.engine);
                rate[{r.size, r.engine}].push_back(r.rate);
                rss[{r.size, r.engine}].push_back(r.rss);
            }
            if (!engines.count("loom")) continue;
            std::string x_label = sweep + " (";
            for (std::size_t s : sizes) x_label += (x_label.back() == '(' ? "" : ", ") + std::to_string(s);
            x_label += ")";
            const std::string suffix = ", " + std::to_string(threads) + " thread" + (threads > 1 ? "s" : "");
            svg::Chart speed{"training tokens/s" + suffix, x_label, {}}, ratio{"loom / engine" + suffix, x_label, {}},
                memory{"peak RSS MiB" + suffix, x_label, {}};
            for (std::size_t size : sizes) {  // the figures drawn, as text
                std::printf("%s %zu, %zu thread(s):", sweep.c_str(), size, threads);
                for (const std::string& e : engines)
                    if (!rate[{size, e}].empty())
                        std::printf(" %s %.1f tokens/s %.1f MiB;", e.c_str(), median(rate[{size, e}]),
                                    median(rss[{size, e}]));
                for (const std::string& e : engines)
                    if (e != "loom" && !rate[{size, e}].empty() && !rate[{size, "loom"}].empty())
                        std::printf(" loom / %s %.2f;", e.c_str(),
                                    median(rate[{size, "loom"}]) / median(rate[{size, e}]));
                std::printf("\n");
            }
            for (const std::string& e : engines) {
                svg::Series s{e, {}}, r{e, {}}, m{e, {}};
                for (std::size_t size : sizes) {
                    const auto& mine = rate[{size, "loom"}];
                    const auto& theirs = rate[{size, e}];
                    if (mine.empty() || theirs.empty())
                        throw DataError(csv_path + ": " + sweep + " " + std::to_string(size) +
                                        " has no training run of " + (mine.empty() ? std::string("loom") : e));
                    s.y.push_back(median(theirs));
                    r.y.push_back(median(mine) / median(theirs));
                    m.y.push_back(median(rss[{size, e}]));
                }
                speed.series.push_back(s);
                if (e != "loom") ratio.series.push_back(r);
                memory.series.push_back(m);
            }
            std::vector<svg::Chart> charts{speed};
            if (!ratio.series.empty()) charts.push_back(ratio);
            charts.push_back(memory);
            const std::string path = prefix + "_" + sweep + "_" + std::to_string(threads) + "t.svg";
            write_text_atomically(path, svg::line_charts(charts));
            std::printf("wrote %s\n", path.c_str());
            ++written;
        }
        if (written == 0) throw DataError(csv_path + ": no sweep holds a loom training run");
    } catch (const std::exception& e) {
        std::fprintf(stderr, "plot_lm_scaling: %s\n", e.what());
        return 1;
    }
    return 0;
}
