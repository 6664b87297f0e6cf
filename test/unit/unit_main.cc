// loom's CPU unit tests (Check). One runner, one suite per concept.
#include <cstdlib>
#ifdef __SANITIZE_ADDRESS__
#include <dlfcn.h>
#endif

#include "unit_suites.h"

int main() {
#ifdef __SANITIZE_ADDRESS__
    // hwloc's PCI plugin and libpciaccess are unloaded when a topology is
    // destroyed; the allocations libpciaccess keeps then show as leaks from
    // an unknown module. Kept mapped, they resolve to the library, which
    // test/sanitizers/lsan.supp names.
    dlopen("libpciaccess.so.0", RTLD_NOW | RTLD_NODELETE);
#endif
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
    srunner_add_suite(sr, doubling_schedule_suite());
    srunner_add_suite(sr, exchange_schedule_suite());
    srunner_add_suite(sr, scan_schedule_suite());
    srunner_add_suite(sr, dt_pieces_suite());
    srunner_add_suite(sr, dt_view_suite());
    srunner_add_suite(sr, select_suite());
    srunner_add_suite(sr, params_suite());
    srunner_add_suite(sr, side_channel_suite());
    srunner_add_suite(sr, arrival_suite());
    srunner_add_suite(sr, arrival_query_suite());
    srunner_add_suite(sr, zerocopy_schedule_suite());
    srunner_add_suite(sr, desc_board_suite());
    srunner_add_suite(sr, watchdog_suite());
    srunner_add_suite(sr, tuning_suite());
    srunner_add_suite(sr, mapping_closer_suite());
    srunner_add_suite(sr, resident_handoff_suite());
    srunner_add_suite(sr, where_memo_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
