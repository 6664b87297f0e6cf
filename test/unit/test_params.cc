// The parameter table (src/base/param_table.cc): every entry well formed and
// unique, integers read through it with the default for unset, malformed
// and out-of-range values, and docs/parameters.md's table exactly the one
// generated from it (on a mismatch the test prints the table to paste).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "base/param_table.h"
#include "core/comm/params.h"
#include "unit_suites.h"

using namespace loom;

namespace {

const char *const kBegin = "<!-- core parameters: generated from src/base/param_table.cc; test/unit/loom_unit checks it -->";
const char *const kEnd = "<!-- end of core parameters -->";

std::string generatedTable() {
    std::ostringstream o;
    o << "| MCA parameter | environment | default | meaning |\n|---|---|---|---|\n";
    for (int i = 0; i < loomParamCount(); ++i) {
        const loomParamDef *d = loomParamAt(i);
        o << "| `coll_loom_" << d->name << "` | `" << d->env << "` | " << d->shown << " | " << d->help;
        if (d->type == LOOM_PARAM_INT) o << " (" << d->lo << ".." << d->hi << ")";
        if (d->agreed) o << "; alike on every rank";
        o << " |\n";
    }
    return o.str();
}

} // namespace

START_TEST(every_entry_is_well_formed_and_unique) {
    std::set<std::string> names, envs;
    ck_assert_int_gt(loomParamCount(), 20);
    for (int i = 0; i < loomParamCount(); ++i) {
        const loomParamDef *d = loomParamAt(i);
        ck_assert(d && d->name && d->env && d->shown && d->help);
        ck_assert_msg(names.insert(d->name).second, "%s twice", d->name);
        ck_assert_msg(envs.insert(d->env).second, "%s twice", d->env);
        ck_assert_msg(!strncmp(d->env, "LOOM_", 5), "%s", d->env);
        ck_assert_msg(!strchr(d->help, '|'), "%s: a | would break docs/parameters.md's table", d->name);
        if (d->type == LOOM_PARAM_INT) ck_assert_msg(d->lo <= d->def && d->def <= d->hi, "%s: default outside its range", d->name);
    }
    ck_assert_ptr_null(loomParamAt(loomParamCount()));
}
END_TEST

START_TEST(bad_values_get_the_default) {
    unsetenv("LOOM_NSLOTS");
    ck_assert_int_eq(paramLong("LOOM_NSLOTS"), 4);
    setenv("LOOM_NSLOTS", "8", 1);
    ck_assert_int_eq(paramLong("LOOM_NSLOTS"), 8);
    setenv("LOOM_NSLOTS", "1000", 1); // out of range: warned once, the default
    ck_assert_int_eq(paramLong("LOOM_NSLOTS"), 4);
    setenv("LOOM_NSLOTS", "four", 1);
    ck_assert_int_eq(paramLong("LOOM_NSLOTS"), 4);
    setenv("LOOM_NSLOTS", "0x10", 1); // C notations are numbers
    ck_assert_int_eq(paramLong("LOOM_NSLOTS"), 16);
    unsetenv("LOOM_NSLOTS");
    setenv("LOOM_NET", "", 1);
    ck_assert_ptr_null(paramString("LOOM_NET"));
    setenv("LOOM_NET", "ucx", 1);
    ck_assert_str_eq(paramString("LOOM_NET"), "ucx");
    unsetenv("LOOM_NET");
}
END_TEST

// The tunables every rank must hold alike: listed in table order, found by
// name, and each rank's words follow its environment (an integer as read,
// a string by a hash, unset 0).
START_TEST(agreed_tunables_are_words_alike_or_not) {
    ck_assert_int_gt(loomAgreedCount(), 20);
    ck_assert_int_le(loomAgreedCount(), LOOM_MAX_AGREED);
    int listed = 0;
    for (int i = 0; i < loomParamCount(); ++i) listed += loomParamAt(i)->agreed != 0;
    ck_assert_int_eq(listed, loomAgreedCount());
    const int slots = loomAgreedIndex("LOOM_NSLOTS"), algo = loomAgreedIndex("LOOM_ALGO");
    ck_assert(slots >= 0 && algo >= 0 && loomAgreedIndex("LOOM_TIMEOUT") < 0);
    ck_assert_str_eq(loomAgreedAt(slots)->env, "LOOM_NSLOTS");
    unsigned long long a[LOOM_MAX_AGREED], b[LOOM_MAX_AGREED];
    loomAgreedWords(a);
    ck_assert_uint_eq(a[slots], 4);
    ck_assert_uint_eq(a[algo], 0);
    setenv("LOOM_NSLOTS", "8", 1);
    setenv("LOOM_ALGO", "ring", 1);
    loomAgreedWords(b);
    ck_assert_uint_eq(b[slots], 8);
    ck_assert_uint_ne(b[algo], 0);
    setenv("LOOM_ALGO", "oneshot", 1);
    loomAgreedWords(a);
    ck_assert_uint_ne(a[algo], b[algo]);
    unsetenv("LOOM_NSLOTS");
    unsetenv("LOOM_ALGO");
}
END_TEST

START_TEST(the_documented_table_is_the_generated_one) {
    std::ifstream f(LOOM_PARAMS_DOC);
    ck_assert_msg(f.good(), "cannot read %s", LOOM_PARAMS_DOC);
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string readme = ss.str(), want = generatedTable();
    const size_t b = readme.find(kBegin), e = readme.find(kEnd);
    const bool found = b != std::string::npos && e != std::string::npos && e > b;
    const std::string have = found ? readme.substr(b + strlen(kBegin) + 1, e - b - strlen(kBegin) - 1) : "";
    if (have != want)
        fprintf(stderr, "docs/parameters.md's core parameter table differs from src/base/param_table.cc; put this between the "
                        "markers\n%s\n%s%s\n", kBegin, want.c_str(), kEnd);
    ck_assert_msg(found, "docs/parameters.md lacks the markers of the generated parameter table");
    ck_assert_msg(have == want, "docs/parameters.md's parameter table is not the generated one (printed above)");
}
END_TEST

START_TEST(ring_orders_parse_and_refuse) {
    std::vector<std::vector<int>> o;
    std::string why;
    ck_assert(parseRingOrders("0 1 2 3/0,3,2,1", 4, &o, &why));
    ck_assert(o.size() == 2 && o[0] == std::vector<int>({0, 1, 2, 3}) && o[1] == std::vector<int>({0, 3, 2, 1}));
    ck_assert(parseRingOrders(" 1 0 ", 2, &o, &why) && o.size() == 1 && o[0] == std::vector<int>({1, 0}));
    // Each refusal says why; a communicator of another size is one of them.
    const char *bad[] = {"", "0 1 2", "0 1 2 3 4", "0 1 1 3", "0 1 x 3", "0 1 2 3/", "0 1 2 -3", "0 1 2 3/0 1 2", "0 1 2 3|0 1 2 3"};
    for (const char *t : bad) {
        why.clear();
        ck_assert_msg(!parseRingOrders(t, 4, &o, &why), "'%s' accepted", t);
        ck_assert_msg(!why.empty(), "'%s' refused without a reason", t);
    }
    ck_assert(!parseRingOrders(nullptr, 4, &o, &why));
}
END_TEST

Suite *params_suite(void) {
    Suite *s = suite_create("params");
    TCase *tc = tcase_create("params");
    tcase_add_test(tc, every_entry_is_well_formed_and_unique);
    tcase_add_test(tc, bad_values_get_the_default);
    tcase_add_test(tc, agreed_tunables_are_words_alike_or_not);
    tcase_add_test(tc, the_documented_table_is_the_generated_one);
    tcase_add_test(tc, ring_orders_parse_and_refuse);
    suite_add_tcase(s, tc);
    return s;
}
