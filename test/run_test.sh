#!/bin/sh
# Runs one .mpitest file under mpirun with coll/loom taken from the build tree.
#
# A .mpitest file sets:
#   NP=N              ranks (for NEEDS_GPU=1: at most the GPU count, at least 2)
#   PROG=path         program, relative to the build tree, and ARGS
#   MCA="..."         extra mpirun arguments
#   SKIP_SANITIZED=1  skipped in the ASan/UBSan build
#   EXPECT=selected|deselected
#   EXPECT_PATH=delegated|staged|gpu   path every collective in COLLS must report
#   COLLS="..."       collectives to look for (default: all loom overrides)
#   NEEDS_GPU=1       skip, with the reason, where there is no GPU
#   NEEDS_ULFM=1      skip, with the reason, where Open MPI has no ULFM (its ftmpi extension); else
#                     mpirun runs with --with-ft ulfm (survivors of a death go on)
#   MIN_GPUS=N        with NEEDS_GPU: skip, with the reason, where there are fewer GPUs
#   NEEDS_MCA="pml:ucx ..."  skip, with the reason, where Open MPI lacks one of these components
#                     (e.g. an Open MPI 5 built without UCX)
#   ENV="A=1 B=2"     environment for the ranks (exported and forwarded with -x)
#   EXPECT_LOG="re"   extended regexes, one per line, that the output must each match (e.g. the transport used)
#   REJECT_LOG="re"   extended regexes, one per line, that no line of the output may match
#   EXPECT_ABORT=S    the job must end with a non-zero status (MPI_Abort) within S seconds, leaving no
#                     process of PROG behind
# The build tree's component comes first in mca_base_component_path: Open MPI loads the
# first mca_coll_loom.so it finds, and an installed copy must not shadow it.
# Environment: LOOM_BUILDDIR, LOOM_OMPI_PKGLIBDIR, LOOM_MPIRUN (set by make check
# or test/gpu/run.sh); LOOM_TEST_TIMEOUT: seconds before the run is killed
# (600; on a lent GPU host a smaller cap keeps one hang from eating the call);
# LOOM_GPU_SHARING=1: a test that wants MIN_GPUS GPUs runs with its ranks
# sharing fewer (correctness holds, timings do not).
set -u
. "$1"
: "${MIN_GPUS:=1}" "${EXPECT_LOG:=}" "${REJECT_LOG:=}" "${ARGS:=}" "${MCA:=}" "${EXPECT:=selected}" "${EXPECT_PATH:=delegated}" "${NEEDS_GPU:=0}" "${ENV:=}"
: "${NEEDS_ULFM:=0}" "${EXPECT_ABORT:=}" "${NEEDS_MCA:=}"
ALL_COLLS="allgather allgatherv allreduce alltoall alltoallv barrier bcast exscan gather reduce
  reduce_scatter reduce_scatter_block scan scatter iallgather iallgatherv iallreduce ialltoall ialltoallv
  ibarrier ibcast iexscan igather ireduce ireduce_scatter ireduce_scatter_block iscan iscatter"
: "${COLLS:=$ALL_COLLS}"
B=$LOOM_BUILDDIR
# A test whose transport does not run under the sanitizers (UCX's memory hooks and ASan's).
if [ "${SKIP_SANITIZED:-0}" = 1 ] && [ -n "${ASAN_OPTIONS:-}" ]; then
    echo "SKIP: not run in the sanitizer build (SKIP_SANITIZED: UCX's memory hooks and ASan's)"; exit 77
fi

if [ "$NEEDS_GPU" = 1 ]; then
    ngpu=$("$B/test/gpu/gpu_count")
    case "$ngpu" in
        0*) echo "SKIP: needs a CUDA GPU, found $ngpu; on a GPU host run: test/gpu/run.sh BUILDDIR"; exit 77;;
    esac
    ngpu=${ngpu%% *}
    [ "$ngpu" -lt "$MIN_GPUS" ] && [ "${LOOM_GPU_SHARING:-0}" != 1 ] &&
        { echo "SKIP: needs $MIN_GPUS GPUs, found $ngpu (LOOM_GPU_SHARING=1: ranks share them)"; exit 77; }
    [ "$ngpu" -lt "$NP" ] && [ "$ngpu" -ge 2 ] && NP=$ngpu
fi

for fc in $NEEDS_MCA; do
    run=${LOOM_MPIRUN:-mpirun}
    "${run%mpirun}ompi_info" 2>/dev/null | grep -q "MCA ${fc%%:*}: ${fc#*:} " ||
        { echo "SKIP: needs Open MPI's ${fc%%:*}/${fc#*:} component, which this Open MPI lacks (ompi_info)"; exit 77; }
done
if [ "$NEEDS_ULFM" = 1 ]; then
    run=${LOOM_MPIRUN:-mpirun}
    "${run%mpirun}ompi_info" 2>/dev/null | grep -q "MPI extensions:.*ftmpi" ||
        { echo "SKIP: needs an Open MPI with ULFM (ompi_info lists no ftmpi extension: Open MPI 5 has it)"; exit 77; }
    MCA="--with-ft ulfm $MCA"
fi

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
# Sanitizer builds: Open MPI's libraries have no frame pointers, so leaks in
# them are only attributed (and suppressed, test/sanitizers/lsan.supp) with
# the slow unwinder. They run several times slower: twice the time limit.
limit=${LOOM_TEST_TIMEOUT:-600}
[ -n "${ASAN_OPTIONS:-}" ] && export ASAN_OPTIONS="$ASAN_OPTIONS:fast_unwind_on_malloc=0" && limit=$((limit * 2))
fwd=
for kv in $ENV; do
    export "${kv?}"
    fwd="$fwd -x ${kv%%=*}"
done
log=$(mktemp)
# Open MPI's component search opens every .so/.la in the path: give it a
# folder with the component alone (a build tree's .libs also holds libtool
# archives and symlinks, and dangling ones there break mpirun's own start-up).
comp=$(mktemp -d)
trap 'rm -rf "$log" "$comp"' EXIT
cp "$B/.libs/mca_coll_loom.so" "$comp/" || { echo "FAIL: no $B/.libs/mca_coll_loom.so"; exit 1; }
echo "+ $ENV mpirun -np $NP $MCA $PROG $ARGS"
started=$(date +%s)
# shellcheck disable=SC2086
timeout -k 5 "$limit" "${LOOM_MPIRUN:-mpirun}" -np "$NP" --oversubscribe --bind-to none -x NCCL_NVLS_ENABLE $fwd \
    --mca mca_base_component_path "$comp:$LOOM_OMPI_PKGLIBDIR" \
    --mca coll_loom_verbose 1 $MCA "$B/$PROG" $ARGS >"$log" 2>&1
rc=$?
cat "$log"
[ $rc -eq 77 ] && { echo "SKIP: $PROG skipped itself (see above)"; exit 77; }
if [ -n "$EXPECT_ABORT" ]; then
    took=$(($(date +%s) - started))
    [ $rc -ne 0 ] || { echo "FAIL: $PROG exited with 0, not aborted"; exit 1; }
    [ $rc -ne 124 ] && [ $rc -ne 137 ] && [ "$took" -le "$EXPECT_ABORT" ] ||
        { echo "FAIL: the aborted job took ${took} s to end (rc $rc), more than $EXPECT_ABORT"; exit 1; }
    sleep 1
    # the program itself (argv[0] its path), not this script, whose arguments may contain that path
    left=$(pgrep -f "^$B/$PROG( |\$)" || true)
    [ -z "$left" ] || { echo "FAIL: processes of $PROG left behind: $left"; exit 1; }
    echo "ok: the job ended (rc $rc) ${took} s after it started, no process left"
else
    [ $rc -eq 0 ] || { echo "FAIL: $PROG exited with $rc"; exit 1; }
fi

while IFS= read -r re; do
    [ -z "$re" ] || grep -Eq -e "$re" "$log" || { echo "FAIL: the output does not show: $re"; exit 1; }
done <<EOF
$EXPECT_LOG
EOF
while IFS= read -r re; do
    [ -z "$re" ] || ! grep -Eq -e "$re" "$log" || { echo "FAIL: the output shows: $(grep -Em1 -e "$re" "$log")"; exit 1; }
done <<EOF
$REJECT_LOG
EOF
selected=$(grep -c "coll/loom .*: selected$" "$log")
if [ "$EXPECT" = deselected ]; then
    [ "$selected" -eq 0 ] || { echo "FAIL: loom was selected although deselected"; exit 1; }
    grep -q "coll/loom" "$log" && { echo "FAIL: loom printed although deselected"; exit 1; }
    echo "ok: loom not selected, program passed"
    exit 0
fi
# MPI_COMM_WORLD on every rank at least.
[ "$selected" -ge "$NP" ] || { echo "FAIL: loom selected on $selected communicators, expected >= $NP"; exit 1; }
missing=
for c in $COLLS; do
    # barriers carry no buffer: they are always delegated
    case "$EXPECT_PATH:$c" in staged:*barrier|gpu:*barrier) continue;; esac
    grep -q ": $c -> $EXPECT_PATH\$" "$log" || missing="$missing $c"
done
[ -z "$missing" ] || { echo "FAIL: no call took the $EXPECT_PATH path through loom for:$missing"; exit 1; }
echo "ok: loom selected on $selected communicators; every checked collective took the $EXPECT_PATH path"
