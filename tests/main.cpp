// doctest's main, plus one rule: a run in which no test case matched the filters fails. CTest runs
// each TEST_CASE by name; a name that registration mangles would otherwise "pass" with 0 assertions.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <iostream>

namespace {

int matched_test_cases = -1;  // -1: no test run happened (e.g. --list-test-cases)

struct MatchCounter : doctest::IReporter {
    explicit MatchCounter(const doctest::ContextOptions&) {}
    void test_run_end(const doctest::TestRunStats& stats) override {
        matched_test_cases = static_cast<int>(stats.numTestCasesPassingFilters);
    }
    void report_query(const doctest::QueryData&) override {}
    void test_run_start() override {}
    void test_case_start(const doctest::TestCaseData&) override {}
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

int main(int argc, char** argv) {
    doctest::Context context(argc, argv);
    const int rc = context.run();
    if (context.shouldExit()) return rc;
    if (rc == 0 && matched_test_cases == 0) {
        std::cerr << "loom_tests: no test case matched the filters, so nothing was tested; check the test's name\n";
        return 1;
    }
    return rc;
}
