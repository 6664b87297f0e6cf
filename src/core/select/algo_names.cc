// The algorithms' and protocols' names, and LOOM_ALGO's and LOOM_PROTO's
// syntax (declared in select.h): read at parameter parsing, below every
// other part of src/core.
#include "core/select/select.h"
#include "base/param_read.h"
#include "core/algo/registry.h"

namespace loom {

bool parseAlgoMask(const char *text, unsigned *mask) {
    if (!text || !*text) {
        *mask = kAllAlgos;
        return true;
    }
    NamedBit keys[kNumAlgos];
    for (int i = 0; i < kRegistrySize; ++i) keys[i] = NamedBit{kRegistry[i]->key, 1u << kRegistry[i]->algo};
    int unknown = 0;
    const unsigned m = parseNameMask(text, keys, kRegistrySize, kAllAlgos, &unknown);
    if (unknown || !m) return false;
    *mask = m;
    return true;
}

int algoProto(int algo) {
    const AlgoEntry *e = algoEntry(algo);
    return e ? e->proto : -1;
}

const char *protoName(int proto) {
    static const char *const names[kNumRingProtos] = {"Simple", "LL", "LL128"}; // kProtoSimple, kProtoLL, kProtoLL128
    return proto >= 0 && proto < kNumRingProtos ? names[proto] : "?";
}

bool parseProtoAlgos(const char *text, unsigned *algos) {
    if (!text || !*text) {
        *algos = kAllAlgos;
        return true;
    }
    const NamedBit keys[kNumRingProtos] = {
        {"LL", 1u << kProtoLL}, {"Simple", 1u << kProtoSimple}, {"LL128", 1u << kProtoLL128}};
    int unknown = 0;
    const unsigned protos = parseNameMask(text, keys, kNumRingProtos, (1u << kNumRingProtos) - 1, &unknown);
    unsigned m = 0;
    for (int i = 0; i < kRegistrySize; ++i)
        if (protos & (1u << kRegistry[i]->proto)) m |= 1u << kRegistry[i]->algo;
    if (unknown || !m) return false;
    *algos = m;
    return true;
}

const char *algoName(int algo) {
    const AlgoEntry *e = algoEntry(algo);
    return e ? e->name : "?";
}

} // namespace loom
