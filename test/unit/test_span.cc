// Span arithmetic of the staging path: which bytes a (type, count) touches.
extern "C" {
#include "coll/coll_loom_span.h"
}
#include "unit_suites.h"

namespace {
const loom_type_shape_t kInt = {4, 0, 4};
// vector(2 blocks of 2 ints, stride 3) resized to 6 ints: data in [0, 20).
const loom_type_shape_t kHoley = {24, 0, 20};
}

START_TEST(contiguous) {
    loom_span_t s = loom_span_of(&kInt, 10);
    ck_assert_int_eq(s.lo, 0);
    ck_assert_uint_eq(s.bytes, 40);
    ck_assert_uint_eq(loom_span_of(&kInt, 0).bytes, 0);
}
END_TEST

START_TEST(trailing_hole_not_copied) {
    loom_span_t s = loom_span_of(&kHoley, 3); // elements at 0, 24, 48; last data byte 48 + 20
    ck_assert_int_eq(s.lo, 0);
    ck_assert_uint_eq(s.bytes, 68);
}
END_TEST

START_TEST(negative_lb_and_extent) {
    const loom_type_shape_t lb = {8, -4, 8}; // data starts 4 bytes before the pointer
    loom_span_t s = loom_span_of(&lb, 2);
    ck_assert_int_eq(s.lo, -4);
    ck_assert_uint_eq(s.bytes, 16);
    const loom_type_shape_t down = {-8, 0, 4}; // negative stride walks downwards
    s = loom_span_of(&down, 3);
    ck_assert_int_eq(s.lo, -16);
    ck_assert_uint_eq(s.bytes, 20);
}
END_TEST

START_TEST(v_span_with_gaps_and_empty_ranks) {
    const int counts[] = {2, 0, 3};
    const int displs[] = {5, 0, 1}; // rank 2 first in memory, rank 1 empty
    loom_span_t s = loom_span_of_v(&kInt, counts, displs, 3);
    ck_assert_int_eq(s.lo, 4);         // displs[2] * 4
    ck_assert_uint_eq(s.bytes, 28 - 4); // end of rank 0's block: (5 + 2) * 4
    const int none[] = {0, 0, 0};
    ck_assert_uint_eq(loom_span_of_v(&kInt, none, displs, 3).bytes, 0);
}
END_TEST

START_TEST(union_of_spans) {
    const loom_span_t empty = {0, 0}, a = {8, 4}, b = {-4, 4}, inside = {9, 2};
    loom_span_t u = loom_span_union(empty, a);
    ck_assert_int_eq(u.lo, 8);
    ck_assert_uint_eq(u.bytes, 4);
    u = loom_span_union(a, empty);
    ck_assert_int_eq(u.lo, 8);
    ck_assert_uint_eq(u.bytes, 4);
    u = loom_span_union(a, b); // disjoint, b below a: covers the gap between them
    ck_assert_int_eq(u.lo, -4);
    ck_assert_uint_eq(u.bytes, 16);
    u = loom_span_union(a, inside);
    ck_assert_int_eq(u.lo, 8);
    ck_assert_uint_eq(u.bytes, 4);
}
END_TEST

Suite *span_suite(void) {
    Suite *s = suite_create("span");
    TCase *tc = tcase_create("span");
    tcase_add_test(tc, contiguous);
    tcase_add_test(tc, trailing_hole_not_copied);
    tcase_add_test(tc, negative_lb_and_extent);
    tcase_add_test(tc, v_span_with_gaps_and_empty_ranks);
    tcase_add_test(tc, union_of_spans);
    suite_add_tcase(s, tc);
    return s;
}
