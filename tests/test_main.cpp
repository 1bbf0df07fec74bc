// The doctest main every test binary shares, with one guard: ctest runs each test case as
// `test_x --test-case=NAME`, and a NAME ctest mangled (a ';' splits a CMake list) matches nothing,
// which doctest counts as success. So a run that was given a test-case filter and ran no test
// case fails, naming the filter, instead of passing without testing anything.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <atomic>
#include <cstdio>
#include <string>

namespace {

std::atomic<int> test_cases_started{0};

// A listener sees every test case that runs, whatever reporter prints the results.
struct CountTestCases : doctest::IReporter {
  explicit CountTestCases(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData&) override { ++test_cases_started; }
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};
REGISTER_LISTENER("count_test_cases", 1, CountTestCases);

const char* test_case_filter(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string argument = argv[i];
    for (const char* prefix : {"--test-case=", "-tc="})
      if (argument.rfind(prefix, 0) == 0) return argv[i];
  }
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  const int failures = context.run();
  if (context.shouldExit()) return failures;  // --help, --list-test-cases, ...
  const char* filter = test_case_filter(argc, argv);
  if (failures == 0 && filter != nullptr && test_cases_started == 0) {
    std::fprintf(stderr, "no test case matches %s: a test name with ';' does not survive ctest\n", filter);
    return 1;
  }
  return failures;
}
