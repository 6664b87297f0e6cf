#include "base/debug.h"
#include "base/embed.h"
#include "base/param_read.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <strings.h>
#include <unistd.h>

namespace loom {

namespace {

const NamedBit kSubsysNames[] = {{"INIT", kInit}, {"TOPO", kTopo}, {"GRAPH", kGraph}, {"NET", kNet},
                                   {"PROXY", kProxy}, {"COLL", kColl}, {"TUNING", kTune}, {"TUNE", kTune}, {"ALL", kAll}};

const char *subsysName(unsigned bit) {
    for (const auto &s : kSubsysNames)
        if (s.bit == bit) return s.name;
    return "LOOM";
}

LogConfig g_config;
std::once_flag g_configOnce;
char g_host[64];
std::atomic<bool> g_embedderReportsErrors{false}; // embed.h
thread_local char t_lastError[2048];
thread_local bool t_background = false;

const LogConfig &config() {
    std::call_once(g_configOnce, [] {
        g_config = parseLogConfig(paramString("LOOM_DEBUG"), paramString("LOOM_DEBUG_SUBSYS"));
        if (gethostname(g_host, sizeof(g_host)) != 0) strcpy(g_host, "?");
        g_host[sizeof(g_host) - 1] = '\0';
    });
    return g_config;
}

} // namespace

LogConfig parseLogConfig(const char *level, const char *subsys) {
    LogConfig c{LogLevel::Warn, kAll};
    if (level && *level) {
        if (!strcasecmp(level, "NONE")) c.level = LogLevel::None;
        else if (!strcasecmp(level, "WARN")) c.level = LogLevel::Warn;
        else if (!strcasecmp(level, "INFO")) c.level = LogLevel::Info;
        else if (!strcasecmp(level, "TRACE")) c.level = LogLevel::Trace;
    }
    if (subsys && *subsys) {
        // "^NET,PROXY" means all but those; names it does not know are ignored.
        int unknown = 0;
        c.subsys = parseNameMask(subsys, kSubsysNames, (int)(sizeof(kSubsysNames) / sizeof(kSubsysNames[0])), ~0u,
                                 &unknown);
    }
    return c;
}

bool logEnabled(LogLevel level, unsigned subsys) {
    const LogConfig &c = config();
    return static_cast<int>(level) <= static_cast<int>(c.level) && (c.subsys & subsys);
}

void logPrintf(LogLevel level, unsigned subsys, const char *fmt, ...) {
    config();
    static const char *kLevel[] = {"", "WARN", "INFO", "TRACE"};
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s:%d:loom %s %s %s\n", g_host, static_cast<int>(getpid()), kLevel[static_cast<int>(level)],
            subsysName(subsys), msg);
}

loomResult_t fail(loomResult_t result, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t_lastError, sizeof(t_lastError), fmt, ap);
    va_end(ap);
    if (g_embedderReportsErrors.load(std::memory_order_relaxed) && !t_background)
        LOOM_INFO(kAll, "%s (%s)", t_lastError, loomGetErrorString(result));
    else
        LOOM_WARN(kAll, "%s (%s)", t_lastError, loomGetErrorString(result));
    return result;
}

void markBackgroundThread() { t_background = true; }

} // namespace loom

extern "C" void loomEmbedderReportsErrors(int on) { loom::g_embedderReportsErrors.store(on != 0); }

extern "C" const char *loomGetLastError(void) { return loom::t_lastError; }

extern "C" const char *loomGetErrorString(loomResult_t result) {
    switch (result) {
    case loomSuccess: return "no error";
    case loomUnhandledCudaError: return "unhandled CUDA error";
    case loomSystemError: return "system error";
    case loomInternalError: return "internal error";
    case loomInvalidArgument: return "invalid argument";
    case loomInvalidUsage: return "invalid usage";
    case loomRemoteError: return "remote peer failed";
    case loomProcFailed: return "peer process gone";
    case loomInProgress: return "operation in progress";
    case loomNotSupported: return "not supported";
    default: return "unknown loom result";
    }
}

extern "C" loomResult_t loomGetVersion(int *version) {
    if (!version) return loom::fail(loomInvalidArgument, "loomGetVersion: version is NULL");
    *version = LOOM_VERSION_CODE;
    return loomSuccess;
}
