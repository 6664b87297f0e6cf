/*
 * Reading one tunable of the parameter table (param_table.h) from its LOOM_*
 * environment variable (the component maps its coll_loom_* MCA parameters
 * onto the same names). The parsed set the runtime runs with is core's
 * (core/comm/params.h).
 */
#pragma once

namespace loom {

// A tunable of the parameter table by its environment name, read now: its
// LOOM_* environment value, else the table's default; not a number or out of
// range: one warning per variable, and the default.
long paramLong(const char *env);
// A string tunable: its value, or null when unset.
const char *paramString(const char *env);

// A list tunable (LOOM_DEBUG_SUBSYS, LOOM_ALGO): names separated by commas,
// case-insensitive; a leading ^ means all but the listed ones. Returns the OR
// of the listed names' bits (all & ~that after ^); *unknown counts names,
// empty ones included, that are not in the table (they add no bit).
struct NamedBit {
    const char *name;
    unsigned bit;
};
unsigned parseNameMask(const char *text, const NamedBit *names, int n, unsigned all, int *unknown);

} // namespace loom
