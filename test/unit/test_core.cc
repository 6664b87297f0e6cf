// Core basics: error strings, logging configuration, pointer classification and
// copies on a machine without a GPU (CI's case), argument errors.
#include <cstring>
#include <vector>

#include "base/debug.h"
#include "loom.h"
#include "unit_suites.h"

START_TEST(error_strings) {
    for (int r = 0; r < loomNumResults; ++r)
        ck_assert_str_ne(loomGetErrorString(static_cast<loomResult_t>(r)), "unknown loom result");
    ck_assert_str_eq(loomGetErrorString(static_cast<loomResult_t>(999)), "unknown loom result");
    int v = 0;
    ck_assert_int_eq(loomGetVersion(&v), loomSuccess);
    ck_assert_int_eq(v, LOOM_VERSION_CODE);
    ck_assert_int_eq(loomGetVersion(nullptr), loomInvalidArgument);
    ck_assert_ptr_nonnull(strstr(loomGetLastError(), "NULL"));
}
END_TEST

START_TEST(log_config_parsing) {
    loom::LogConfig c = loom::parseLogConfig(nullptr, nullptr);
    ck_assert(c.level == loom::LogLevel::Warn);
    ck_assert_uint_eq(c.subsys, loom::kAll);
    c = loom::parseLogConfig("info", "TOPO,graph");
    ck_assert(c.level == loom::LogLevel::Info);
    ck_assert_uint_eq(c.subsys, loom::kTopo | loom::kGraph);
    c = loom::parseLogConfig("TRACE", "^NET,PROXY");
    ck_assert(c.level == loom::LogLevel::Trace);
    ck_assert_uint_eq(c.subsys, ~(unsigned)(loom::kNet | loom::kProxy));
    c = loom::parseLogConfig("bogus", "NOPE");
    ck_assert(c.level == loom::LogLevel::Warn); // unknown level keeps the default
    ck_assert_uint_eq(c.subsys, 0u);
}
END_TEST

START_TEST(host_pointers_are_host) {
    std::vector<char> heap(64);
    int stack = 0;
    loomPointerInfo_t info;
    ck_assert_int_eq(loomPointerQuery(heap.data(), &info), loomSuccess);
    ck_assert_int_eq(info.kind, loomMemoryHost);
    ck_assert_int_eq(info.device, -1);
    ck_assert_int_eq(loomPointerQuery(&stack, &info), loomSuccess);
    ck_assert_int_eq(info.kind, loomMemoryHost);
    ck_assert_int_eq(loomPointerQuery(nullptr, &info), loomSuccess);
    ck_assert_int_eq(info.kind, loomMemoryHost);
    ck_assert_int_eq(loomPointerQuery(&stack, nullptr), loomInvalidArgument);
}
END_TEST

START_TEST(host_copies) {
    std::vector<int> a(1000), b(1000, -1);
    for (int i = 0; i < 1000; ++i) a[i] = i * 3;
    ck_assert_int_eq(loomMemcpySync(b.data(), a.data(), a.size() * sizeof(int)), loomSuccess);
    ck_assert(a == b);
    ck_assert_int_eq(loomMemcpySync(nullptr, a.data(), 4), loomInvalidArgument);
    ck_assert_int_eq(loomMemcpySync(b.data(), nullptr, 4), loomInvalidArgument);
    ck_assert_int_eq(loomMemcpySync(nullptr, nullptr, 0), loomSuccess); // nothing to do
}
END_TEST

Suite *core_suite(void) {
    Suite *s = suite_create("core");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, error_strings);
    tcase_add_test(tc, log_config_parsing);
    tcase_add_test(tc, host_pointers_are_host);
    tcase_add_test(tc, host_copies);
    suite_add_tcase(s, tc);
    return s;
}
