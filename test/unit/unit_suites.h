#pragma once
#include <check.h>

Suite *span_suite(void);
Suite *core_suite(void);
