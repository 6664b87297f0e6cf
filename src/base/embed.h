/*
 * What a program that embeds loom's core and reports its errors itself (the
 * Open MPI component) may set. C, for the component.
 */
#ifndef LOOM_EMBED_H
#define LOOM_EMBED_H

#ifdef __cplusplus
extern "C" {
#endif

/* 1: a failed loom call logs its error at INFO instead of WARN, because the
 * embedder reports each one (loomGetLastError) once, in its own words and
 * with its own error class. Warnings that are not call errors stay WARN. */
void loomEmbedderReportsErrors(int on);

#ifdef __cplusplus
}
#endif

#endif
