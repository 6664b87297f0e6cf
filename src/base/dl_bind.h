/*
 * Looking up the entry points of a library loom opens with dlopen (libibverbs,
 * libucp, libcuda), so that loom loads and runs where they are absent.
 */
#pragma once

#include <dlfcn.h>

#include "base/debug.h"

namespace loom {

// `name` from `lib` into `slot`. A missing required symbol is logged at INFO
// with what loom does without it ("no ib plugin") and returns false.
template <typename Fn>
bool dlBind(void *lib, const char *libName, const char *name, Fn *&slot, const char *without, bool required = true,
            unsigned subsys = kNet) {
    slot = reinterpret_cast<Fn *>(dlsym(lib, name));
    if (!slot && required) LOOM_INFO(subsys, "%s lacks %s: %s", libName, name, without);
    return slot || !required;
}

} // namespace loom
