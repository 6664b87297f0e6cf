/*
 * Loads every loom kernel on the current device, once per device and
 * process, before any of them runs there (device/kernel_load.h says why).
 */
#pragma once

#include "loom.h"

namespace loom {

// `device` must be current; rank only names the caller in messages.
loomResult_t loadDeviceKernels(int rank, int device);

} // namespace loom
