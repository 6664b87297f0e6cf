#pragma once
#include <check.h>

Suite *span_suite(void);
Suite *core_suite(void);
Suite *ring_schedule_suite(void);
Suite *topo_suite(void);
Suite *bootstrap_suite(void);
Suite *proxy_suite(void);
Suite *tree_schedule_suite(void);
Suite *edges_suite(void);
Suite *rd_schedule_suite(void);
Suite *oneshot_schedule_suite(void);
Suite *doubling_schedule_suite(void);
Suite *select_suite(void);
Suite *params_suite(void);
Suite *side_channel_suite(void);
Suite *arrival_suite(void);
