/*
 * Detection of this host: GPUs (CUDA runtime), PCI tree and CPUs (hwloc),
 * NVLinks (NVML, loaded with dlopen), NICs (libibverbs, loaded with dlopen,
 * PCI location from sysfs). Every piece degrades: without hwloc PCI
 * information (VMs, containers) devices hang off one CPU with NUMA unknown;
 * without NVML there are no NVLinks; without rdma-core there are no NICs.
 *
 * Uses the CUDA runtime: call it when loom's resources are created, never
 * inside MPI_Init.
 */
#pragma once

#include <string>

#include "topo/system.h"

namespace loom {
namespace topo {

// One host, named after gethostname(). `notes` gets one line per piece that
// was missing or degraded.
System detectLocalSystem(std::string *notes);

// The description of this host: LOOM_TOPO_FILE when set (the host of that file
// named like this host, else its first host), else detection. As XML.
std::string localSystemXml(std::string *notes);

} // namespace topo
} // namespace loom
