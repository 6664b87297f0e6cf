#!/usr/bin/env bash
# CI: a one-node Slurm cluster from Debian's packages on this machine (munge,
# slurmctld and slurmd on localhost; 4 CPUs as tasks, no GPUs), then loom's
# demo through sbatch (Open MPI's mpirun inside the allocation) and through
# srun --mpi=pmix where Slurm and Open MPI both support it (else a visible
# skip). Both must select loom and print a correct result. The cluster is
# stopped and its files removed at the end.
#   contrib/slurm/test_slurm.sh BUILDDIR      (as root; needs slurmctld slurmd slurm-client munge)
set -uo pipefail
B=$(cd "${1:-build}" && pwd)
for c in slurmctld slurmd sbatch srun munged; do
    command -v "$c" >/dev/null || { echo "SKIP: $c not installed (apt-get install slurmctld slurmd slurm-client munge)"; exit 77; }
done
[ "$(id -u)" -eq 0 ] || { echo "SKIP: starting Slurm's daemons needs root"; exit 77; }
d=$(mktemp -d /tmp/loom-slurm.XXXXXX)
chmod 755 "$d"
conf=$d/slurm.conf
host=$(hostname -s)
pk=$(ompi_info --path pkglibdir | sed -n 's/.*Pkglibdir: *//p')
mkdir -p "$d/state" "$d/spool" "$d/comp" "$d/munge"
cp "$B/.libs/mca_coll_loom.so" "$d/comp/"
cat >"$conf" <<CONF
ClusterName=loomci
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$d/munge/munge.socket
SlurmctldPort=16817
SlurmdPort=16818
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool
SlurmctldPidFile=$d/slurmctld.pid
SlurmdPidFile=$d/slurmd.pid
SlurmctldLogFile=$d/slurmctld.log
SlurmdLogFile=$d/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
NodeName=$host CPUs=4 State=UNKNOWN
PartitionName=ci Nodes=$host Default=YES MaxTime=10 State=UP
CONF
export SLURM_CONF=$conf
munge_pid= ctld_pid= d_pid=
stop() {
    scancel --quiet -u root 2>/dev/null
    for p in $d_pid $ctld_pid $munge_pid; do kill "$p" 2>/dev/null; done
    sleep 1
    for p in $d_pid $ctld_pid $munge_pid; do kill -9 "$p" 2>/dev/null; done
    rm -rf "$d"
}
trap stop EXIT
fail() { echo "FAIL: $*"; for f in slurmctld.log slurmd.log; do echo "--- $f"; tail -15 "$d/$f" 2>/dev/null; done; exit 1; }
# munge with a socket and key of its own (the package's key, copied)
cp /etc/munge/munge.key "$d/munge/key" 2>/dev/null || dd if=/dev/urandom of="$d/munge/key" bs=1 count=1024 2>/dev/null
chmod 600 "$d/munge/key"
munged --force -F -S "$d/munge/munge.socket" --key-file "$d/munge/key" --pid-file "$d/munge/pid" \
    --log-file "$d/munge/log" --seed-file "$d/munge/seed" >/dev/null 2>&1 &
munge_pid=$!
slurmctld -D -f "$conf" >/dev/null 2>&1 &
ctld_pid=$!
slurmd -D -f "$conf" >/dev/null 2>&1 &
d_pid=$!
for _ in $(seq 60); do
    sinfo -h -o %T 2>/dev/null | grep -cE '^idle' >/dev/null && break
    sleep 1
done
sinfo -h -o "%P %D %c %T" 2>/dev/null | grep -c idle >/dev/null || fail "the one-node cluster did not come up"
echo "slurm: $(sinfo -h -o '%P: %D node, %c CPUs, %T')"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0
export OMPI_MCA_mca_base_component_path="$pk:$d/comp" OMPI_MCA_coll_loom_verbose=1
check() { # what: the job's output must select loom and be correct
    grep -E 'loom-demo|MPI_COMM_WORLD.*: selected' "$2" | sort -u | head -6
    grep -q "MPI_COMM_WORLD.*: selected" "$2" || fail "$1: loom was not selected"
    grep -q "loom-demo: .*: correct" "$2" || fail "$1: no correct result"
    echo "ok: $1"
}
# 1. sbatch: Open MPI's mpirun inside the allocation
cat >"$d/job.sh" <<JOB
#!/bin/bash
#SBATCH -n 4 -t 5 -o $d/job.out
mpirun --oversubscribe --bind-to none $B/loom-demo
JOB
jid=$(sbatch --parsable "$d/job.sh") || fail "sbatch"
for _ in $(seq 240); do squeue -h -j "$jid" 2>/dev/null | grep -c . >/dev/null || break; sleep 1; done
squeue -h -j "$jid" 2>/dev/null | grep -c . >/dev/null && fail "the sbatch job did not finish in 4 minutes"
check "sbatch (mpirun inside the allocation)" "$d/job.out"
# 2. srun --mpi=pmix, where Slurm has the plugin and Open MPI speaks PMIx
if ! srun --mpi=list 2>&1 | grep -c pmix >/dev/null; then
    echo "SKIP: srun --mpi=pmix: this Slurm has no pmix plugin"
elif ! ompi_info 2>/dev/null | grep -ciE 'MCA pmix: (ext|pmix)' >/dev/null; then
    echo "SKIP: srun --mpi=pmix: this Open MPI has no PMIx client to talk to Slurm's"
else
    timeout 240 srun --mpi=pmix -n 4 -t 5 "$B/loom-demo" >"$d/srun.out" 2>&1 || { cat "$d/srun.out" | tail -20; fail "srun --mpi=pmix exited with an error"; }
    check "srun --mpi=pmix" "$d/srun.out"
fi
