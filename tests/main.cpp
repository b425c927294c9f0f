// doctest's main, plus two rules. A run in which no test case matched the filters fails: CTest runs
// each TEST_CASE by name, and a name that registration mangles would otherwise "pass" with 0
// assertions. A test case whose real data is missing (loom::testing::real_data) is named as skipped,
// and a run in which every matched test case skipped exits with skip_return_code, which CTest
// reports as skipped rather than passed.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <iostream>
#include <map>
#include <string>

#include "test_support.hpp"

namespace {

int matched_test_cases = -1;  // -1: no test run happened (e.g. --list-test-cases)
std::string current_test_case;
std::map<std::string, std::string> skipped;  // test case -> the data path it did not find

struct MatchCounter : doctest::IReporter {
    explicit MatchCounter(const doctest::ContextOptions&) {}
    void test_run_end(const doctest::TestRunStats& stats) override {
        matched_test_cases = static_cast<int>(stats.numTestCasesPassingFilters);
    }
    void report_query(const doctest::QueryData&) override {}
    void test_run_start() override {}
    void test_case_start(const doctest::TestCaseData& data) override { current_test_case = data.m_name; }
    void test_case_reenter(const doctest::TestCaseData&) override {}
    void test_case_end(const doctest::CurrentTestCaseStats&) override {}
    void test_case_exception(const doctest::TestCaseException&) override {}
    void subcase_start(const doctest::SubcaseSignature&) override {}
    void subcase_end() override {}
    void log_assert(const doctest::AssertData&) override {}
    void log_message(const doctest::MessageData&) override {}
    void test_case_skipped(const doctest::TestCaseData&) override {}
};

}  // namespace

DOCTEST_REGISTER_LISTENER("match_counter", 1, MatchCounter);

std::optional<std::filesystem::path> loom::testing::real_data(const std::string& relative) {
    const std::filesystem::path path = std::filesystem::path(LOOM_SOURCE_DIR) / ".." / "shared" / "data" / relative;
    if (std::filesystem::exists(path)) return path;
    skipped.emplace(current_test_case, path.lexically_normal().string());
    return std::nullopt;
}

int main(int argc, char** argv) {
    doctest::Context context(argc, argv);
    const int rc = context.run();
    if (context.shouldExit()) return rc;
    if (rc == 0 && matched_test_cases == 0) {
        std::cerr << "loom_tests: no test case matched the filters, so nothing was tested; check the test's name\n";
        return 1;
    }
    for (const auto& [name, path] : skipped)
        std::cerr << "loom_tests: SKIPPED \"" << name << "\": " << path
                  << " not found (README: where the real data comes from)\n";
    if (rc == 0 && !skipped.empty() && static_cast<int>(skipped.size()) == matched_test_cases)
        return loom::testing::skip_return_code;
    return rc;
}
