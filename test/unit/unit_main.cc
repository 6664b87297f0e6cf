// loom's CPU unit tests (Check). One runner, one suite per concept.
#include <cstdlib>

#include "unit_suites.h"

int main() {
    SRunner *sr = srunner_create(span_suite());
    srunner_add_suite(sr, core_suite());
    srunner_add_suite(sr, ring_schedule_suite());
    srunner_add_suite(sr, topo_suite());
    srunner_add_suite(sr, bootstrap_suite());
    srunner_add_suite(sr, proxy_suite());
    srunner_add_suite(sr, tree_schedule_suite());
    srunner_add_suite(sr, edges_suite());
    srunner_add_suite(sr, rd_schedule_suite());
    srunner_add_suite(sr, oneshot_schedule_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
