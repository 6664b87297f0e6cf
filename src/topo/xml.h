/*
 * XML form of the system graph (LOOM_TOPO_FILE / LOOM_TOPO_DUMP_FILE):
 *
 *   <system version="1">
 *     <host name="node0" p2p="1">
 *       <cpu id="cpu0" numa="0"/>
 *       <pci id="sw0" busid="0000:10:00.0"/>
 *       <gpu id="gpu0" busid="0000:18:00.0" dev="0" sm="90"/>
 *       <nic id="mlx5_0" busid="0000:19:00.0" gbps="400" linklayer="ib" port="1"/>
 *       <nvswitch id="nvs"/>
 *       <link a="cpu0" b="sw0" type="pci" gen="5" width="16"/>
 *       <link a="gpu0" b="nvs" type="nvlink" count="18"/>
 *       <link a="cpu0" b="cpu1" type="sys" bw="40"/>
 *     </host>
 *   </system>
 *
 * A link's bandwidth (GB/s each way) is `bw` if given, else derived: PCI
 * from gen x width, NVLink from count x the GPU generation's link speed.
 * The reader is loom's own and knows exactly this vocabulary.
 */
#pragma once

#include <string>

#include "topo/system.h"

namespace loom {
namespace topo {

// Appends the hosts of `xml` to `sys`. False and *error set on malformed input.
bool parseSystemXml(const std::string &xml, System *sys, std::string *error);
std::string systemToXml(const System &sys);

bool readFile(const std::string &path, std::string *out);
bool writeFile(const std::string &path, const std::string &data);

} // namespace topo
} // namespace loom
