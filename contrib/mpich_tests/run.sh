#!/bin/bash
# Run MPICH (v4.3.2) coll tests, built against Open MPI 4.1 or 5.0 + CUDA, from a testlist.
#
#   OUTDIR/run.sh [TESTLIST]          (default: testlist.device; OUTDIR from build.sh)
#
# Environment:
#   MPIRUN_ARGS  extra mpirun arguments (word-split), e.g. to select a coll component:
#                MPIRUN_ARGS="--mca mca_base_component_path /tmp/comp:$P --mca coll_loom_priority 90"
#                (no --bind-to: run.sh passes its own, and Open MPI 5's mpirun refuses a second)
#   MEMTYPE      unset: use the memtype args of each entry as written.
#                host|reg_host|device|shared: force every rank onto that memory type
#                (-memtype=all is replaced, -counts=a,.. becomes -count=a). MEMTYPE=host
#                runs the same programs without touching CUDA (works on a GPU-less host).
#   NP_MAX       cap on the process count of an entry (default 4); entries that become
#                identical after capping are run once
#   TIMEOUT      seconds per test (default 60)
#   TESTS        extended regex; only run entries whose name matches (e.g. 'allred|reduce')
#   MPIRUN       launcher (default mpirun)
#   LOGDIR       per-test output (default $OUT/mpich-logs if $OUT is set, else /tmp/mpich-coll-logs)
#   TAIL         on FAIL/TIMEOUT print that many last lines of the test's output (default 0)
#   DRYRUN=1     print the commands only
#
# A test PASSes when mpirun exits 0 and the output has MPICH's " No Errors" line (and no
# " Found N errors"); exit 124 from timeout (or 137 after TIMEOUT s) is TIMEOUT; anything else
# (including rc=137 earlier, e.g. the OOM killer) is FAIL.
# Exit status: 0 if everything passed, 1 otherwise.

HERE=$(cd "$(dirname "$0")" && pwd)
LIST=${1:-testlist.device}
[ -f "$LIST" ] || LIST=$HERE/$LIST
[ -f "$LIST" ] || { echo "no testlist $LIST" >&2; exit 2; }
NP_MAX=${NP_MAX:-4}
TIMEOUT=${TIMEOUT:-60}
MPIRUN=${MPIRUN:-mpirun}
if [ -n "$OUT" ]; then LOGDIR=${LOGDIR:-$OUT/mpich-logs}; else LOGDIR=${LOGDIR:-/tmp/mpich-coll-logs}; fi
mkdir -p "$LOGDIR"
TAIL=${TAIL:-0}
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
case "${MEMTYPE:-}" in ''|host|reg_host|device|shared) ;; *) echo "bad MEMTYPE=$MEMTYPE" >&2; exit 2;; esac

declare -A seen
npass=0; nfail=0; ntime=0; nskip=0; failed=()
echo "# testlist=$LIST NP_MAX=$NP_MAX TIMEOUT=$TIMEOUT MEMTYPE=${MEMTYPE:-as-listed} MPIRUN_ARGS=${MPIRUN_ARGS:-} logs=$LOGDIR"

while read -r -a tok; do
    [ ${#tok[@]} -ge 2 ] || continue
    case "${tok[0]}" in \#*) continue;; esac
    name=${tok[0]}; np=${tok[1]}
    [[ $np =~ ^[0-9]+$ ]] || continue
    if [ -n "$TESTS" ] && ! [[ $name =~ $TESTS ]]; then continue; fi
    args=(); envs=()
    for t in "${tok[@]:2}"; do
        case "$t" in
            arg=*) args+=("${t#arg=}") ;;
            env=*) envs+=("${t#env=}") ;;
            *) ;;                       # timeLimit=, mem=, ... ignored
        esac
    done
    if [ -n "$MEMTYPE" ]; then
        hadall=0; new=()
        for a in "${args[@]}"; do
            case "$a" in
                -memtype=all) hadall=1 ;;
                -evenmemtype=*|-oddmemtype=*) ;;
                *) new+=("$a") ;;
            esac
        done
        args=()
        for a in "${new[@]}"; do
            if [ $hadall = 1 ] && [[ $a == -counts=* ]]; then a="-count=${a#-counts=}"; a=${a%%,*}; fi
            args+=("$a")
        done
        args+=("-evenmemtype=$MEMTYPE" "-oddmemtype=$MEMTYPE")
    fi
    [ "$np" -gt "$NP_MAX" ] && np=$NP_MAX
    key="$name $np ${args[*]} ${envs[*]}"
    [ -n "${seen[$key]}" ] && continue
    seen[$key]=1
    desc="$name -np $np ${args[*]}${envs:+ (env ${envs[*]})}"
    exe=$HERE/coll/$name
    if [ ! -x "$exe" ]; then echo "SKIP    $desc (not built)"; nskip=$((nskip+1)); continue; fi
    xargs_=(); for e in "${envs[@]}"; do xargs_+=(-x "${e%%=*}"); done
    cmd=(timeout -k 10 "$TIMEOUT" $MPIRUN -np "$np" --oversubscribe --bind-to none $MPIRUN_ARGS "${xargs_[@]}" "$exe" "${args[@]}")
    if [ -n "$DRYRUN" ]; then echo "${envs[*]} ${cmd[*]}"; continue; fi
    log=$LOGDIR/$(printf '%03d' ${#seen[@]})_$name.log
    t0=$(date +%s.%N)
    env "${envs[@]}" "${cmd[@]}" </dev/null >"$log" 2>&1
    rc=$?
    dt=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
    if [ $rc = 124 ] || { [ $rc = 137 ] && awk -v d="$dt" -v t="$TIMEOUT" 'BEGIN{exit !(d>=t)}'; }; then st=TIMEOUT; ntime=$((ntime+1))
    elif [ $rc = 0 ] && grep -Eq '^ *No Errors *$' "$log" && ! grep -Eq '^ *Found [0-9]+ errors' "$log"; then st=PASS; npass=$((npass+1))
    else st=FAIL; nfail=$((nfail+1)); fi
    printf '%-7s %s [rc=%s %ss]\n' "$st" "$desc" "$rc" "$dt"
    if [ $st != PASS ]; then
        failed+=("$st $desc")
        [ "$TAIL" -gt 0 ] && tail -n "$TAIL" "$log" | sed 's/^/    | /'
    fi
done < "$LIST"

[ -n "$DRYRUN" ] && exit 0
total=$((npass+nfail+ntime))
echo "# SUMMARY: $total run, $npass PASS, $nfail FAIL, $ntime TIMEOUT, $nskip SKIP (logs in $LOGDIR)"
for f in "${failed[@]}"; do echo "#   $f"; done
[ $((nfail+ntime)) = 0 ]
