#!/usr/bin/env bash
# jupyter-tiers sandbox cluster: a real, small Slurm cluster on this one machine, for tests
# and teaching.  It runs munged, MariaDB + slurmdbd (so sacct works), slurmctld, N slurmd
# ("slurmd -N nodeK", each on its own port), a tree topology (two leaf switches under a
# spine) and an sshd on 127.0.0.1 that lets you (or jupyter-tiers) reach the cluster like a
# real login node.  Debian/Ubuntu only; must run as root.
#
#   cluster.sh up [--nodes N] [--cpus C]   start (or verify, or reshape) the cluster; N=4 C=8
#   cluster.sh down                        stop everything this script started
#   cluster.sh status                      show what runs; exit 0 only when healthy
#   cluster.sh restart-ctld                restart slurmctld only (jobs survive)
#   cluster.sh stop-ctld | start-ctld      simulate a controller outage and its end
#   cluster.sh stop-node NODE [--kill]     stop one node's slurmd (SIGKILL with --kill: a crash);
#                                          its job steps run on until slurmctld gives the node up
#   cluster.sh start-node NODE             start that slurmd again, resume the node, wait until
#                                          it is usable (both idempotent: a no-op when already so)
#   cluster.sh stop-dbd | start-dbd        simulate an accounting (slurmdbd) outage and its end
#   cluster.sh env                         print the env file (KEY=value lines)
#
# Everything (configs, state, spool, pid files, logs) lives under
# ${JT_CLUSTER_DIR:-/var/lib/jupyter-tiers-cluster}, which must be root's: the script refuses a
# state directory that is a symlink, is not owned by root or is writable by group or others (or
# sits under such a directory without the sticky bit), since sshd, munge and the daemons run as
# root from it.  `up` moves a cluster from the old default /var/tmp/jupyter-tiers-cluster (down
# there, then removed).  Exit codes: 0 ok, 1 failed or unhealthy, 2 bad usage, 3 refused (not
# root / not Debian or Ubuntu / an unsafe state directory).

# shellcheck disable=SC2015  # "a && b || fail" is used on purpose: fail exits
set -uo pipefail
umask 022
export LC_ALL=C
export PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin${PATH:+:$PATH}"
# Never inherit the context of a Slurm job or another cluster.
for _v in $(compgen -e | grep '^SLURM_' || true); do unset "$_v"; done
unset _v

PROG="${JT_PROG_NAME:-$(basename "$0")}"
CLUSTER_NAME=jtbox
DEFAULT_DIR=/var/lib/jupyter-tiers-cluster
OLD_DEFAULT_DIR=/var/tmp/jupyter-tiers-cluster   # used before: a world-writable parent
DIR="${JT_CLUSTER_DIR:-$DEFAULT_DIR}"
DIR="${DIR%/}"
ETC="$DIR/etc"
RUN="$DIR/run"
LOG="$DIR/log"
STATE="$DIR/state"
SSHDIR="$DIR/ssh"
DBDIR="$DIR/mysql"
CONF="$ETC/slurm.conf"
ENV_FILE="$DIR/cluster.env"
STARTUP_LOG="$LOG/startup.log"

SSH_PORT="${JT_SSH_PORT:-2299}"
DB_PORT="${JT_DB_PORT:-13306}"
CTLD_PORT="${JT_SLURMCTLD_PORT:-16817}"
DBD_PORT="${JT_SLURMDBD_PORT:-16819}"
SLURMD_PORT_BASE="${JT_SLURMD_PORT_BASE:-16900}"   # node K listens on base+K
DB_SOCK="/run/mysqld/jtbox-$DB_PORT.sock"          # MariaDB refuses sockets in most other dirs

PKGS=(slurm-wlm slurmdbd munge mariadb-server openssh-server)
BINS=(slurmctld slurmd slurmdbd sinfo squeue srun sbatch scancel scontrol sacct sacctmgr
      munged munge unmunge mariadbd mariadb mariadb-admin mariadb-install-db ssh ssh-keygen)

export SLURM_CONF="$CONF"

# ---------------------------------------------------------------------------------------------
# output helpers

T_START=$(date +%s.%N)
STEP=""
STEP_T0=""
STEP_OPEN=0
STEP_LOGS=()

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
say() { printf '[%s] %s\n' "$CLUSTER_NAME" "$*"; }
warn() { _close_line; printf '[%s] warning: %s\n' "$CLUSTER_NAME" "$*" >&2; }
_close_line() { if [ "$STEP_OPEN" = 1 ]; then printf '\n'; STEP_OPEN=0; fi; }

refuse() { printf '%s: refusing to run: %s\n' "$PROG" "$*" >&2; exit 3; }
usage_error() { printf '%s: %s\n' "$PROG" "$*" >&2; usage >&2; exit 2; }

# step "What is happening" [log files relevant if it fails...]
step() {
    _close_line
    STEP="$1"; shift
    STEP_LOGS=("$@")
    STEP_T0=$(now)
    printf '[%s] %-44s ' "$CLUSTER_NAME" "$STEP..."
    STEP_OPEN=1
}
# ok [detail]
ok() {
    local t; t=$(since "$STEP_T0")
    if [ "$STEP_OPEN" = 1 ]; then
        printf 'ok%s (%ss)\n' "${1:+, $1}" "$t"
    else
        say "  $STEP: ok${1:+, $1} (${t}s)"
    fi
    STEP_OPEN=0
}
# fail "reason": print the failing step, its logs (with their last lines), exit 1
fail() {
    if [ "$STEP_OPEN" = 1 ]; then printf 'FAILED\n'; STEP_OPEN=0; fi
    {
        printf '%s: step "%s" failed: %s\n' "$PROG" "${STEP:-setup}" "$*"
        local l
        for l in "${STEP_LOGS[@]}"; do
            if [ -s "$l" ]; then
                printf '  log: %s (last lines):\n' "$l"
                tail -n 25 "$l" | sed 's/^/    | /'
            else
                printf '  log: %s (empty or missing)\n' "$l"
            fi
        done
        printf '  all logs: %s/   (overview: %s status)\n' "$LOG" "$PROG"
    } >&2
    exit 1
}

usage() {
    cat <<EOF
Usage: $PROG up [--nodes N] [--cpus C]   start the sandbox Slurm cluster (default 4 nodes x 8 CPUs)
       $PROG down                        stop everything the sandbox started
       $PROG status                      show what runs; exit status 0 only when healthy
       $PROG restart-ctld                restart slurmctld only (running jobs survive)
       $PROG stop-ctld | start-ctld      simulate a controller outage / end it
       $PROG stop-node NODE [--kill]     stop one node's slurmd (--kill: SIGKILL, as a crash)
       $PROG start-node NODE             start it again and resume the node (waits until usable)
       $PROG stop-dbd | start-dbd        simulate an accounting (slurmdbd) outage / end it
       $PROG env                         print the connection settings (KEY=value lines)
State, configs and logs: $DIR  (set JT_CLUSTER_DIR to change)
EOF
}

# ---------------------------------------------------------------------------------------------
# process helpers

# proc_running PID: the process exists and is not a zombie waiting to be reaped
proc_running() {
    local st
    st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
    [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

# pid_alive PIDFILE COMM -> prints the pid if the file names a live process called COMM
pid_alive() {
    local pf="$1" name="$2" pid comm
    [ -s "$pf" ] || return 1
    pid=$(head -n1 "$pf" 2>/dev/null | tr -dc '0-9')
    [ -n "$pid" ] || return 1
    comm=$(cat "/proc/$pid/comm" 2>/dev/null) || return 1
    [ "$comm" = "$name" ] || return 1
    proc_running "$pid" || return 1
    printf '%s\n' "$pid"
}

# our_procs COMM -> pids of processes named COMM whose command line names our slurm.conf
our_procs() {
    local name="$1" p
    for p in /proc/[0-9]*; do
        [ "$(cat "$p/comm" 2>/dev/null)" = "$name" ] || continue
        tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -qF -- "-f $CONF " || continue
        printf '%s\n' "${p#/proc/}"
    done
}

# stop_pid PID NAME [TIMEOUT]: SIGTERM, wait, SIGKILL if needed
stop_pid() {
    local pid="$1" name="$2" timeout="${3:-20}" i
    kill -TERM "$pid" 2>/dev/null || return 0
    for ((i = 0; i < timeout * 10; i++)); do
        proc_running "$pid" || return 0
        sleep 0.1
    done
    warn "$name (pid $pid) did not stop within ${timeout}s; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null
    for ((i = 0; i < 50; i++)); do proc_running "$pid" || return 0; sleep 0.1; done
    return 1
}

# stop_pidfile PIDFILE COMM [TIMEOUT] -> 0 if it stopped something, 1 if nothing ran
stop_pidfile() {
    local pf="$1" name="$2" timeout="${3:-20}" pid
    if pid=$(pid_alive "$pf" "$name"); then
        stop_pid "$pid" "$name" "$timeout"
        rm -f "$pf"
        return 0
    fi
    rm -f "$pf"
    return 1
}

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Run a daemon launcher detached from our stdio, our lock and any other inherited descriptor, so
# that callers capturing our output (pipes) do not hang and the lock is not held by daemons.
# Use "launch CMD..." for daemons that fork themselves, "( detach_exec CMD... ) &" for those that
# stay in the foreground (the subshell becomes CMD: no wrapper process keeps our fds).
detach_exec() {
    exec </dev/null >>"$STARTUP_LOG" 2>&1
    local fd
    for fd in /proc/"$BASHPID"/fd/*; do
        fd=${fd##*/}
        [[ "$fd" =~ ^[0-9]+$ ]] && [ "$fd" -gt 2 ] && eval "exec $fd>&-" 2>/dev/null
    done
    exec "$@"
}
launch() { ( detach_exec "$@" ); }

note_startup() { printf '\n=== %s %s\n' "$(date '+%F %T')" "$*" >>"$STARTUP_LOG"; }

# ---------------------------------------------------------------------------------------------
# checks

preflight() {
    [ "$(id -u)" = 0 ] || refuse "must run as root (try: sudo $PROG ${CMD:-up})"
    local tool path
    for tool in apt-get dpkg-query; do
        path=$(command -v "$tool" 2>/dev/null) && [ -x "$path" ] ||
            refuse "needs a Debian or Ubuntu machine ($tool not found)"
    done
    case "$DIR" in
        /*) ;;
        *) usage_error "JT_CLUSTER_DIR must be an absolute path (got '$DIR')" ;;
    esac
    case "$DIR" in
        *[[:space:]]* | *[\'\"\$\`\\]*) usage_error "JT_CLUSTER_DIR must not contain spaces or quotes (got '$DIR')" ;;
    esac
    local p
    for p in "$SSH_PORT" "$DB_PORT" "$CTLD_PORT" "$DBD_PORT" "$SLURMD_PORT_BASE"; do
        [[ "$p" =~ ^[0-9]+$ ]] && [ "$p" -ge 1 ] && [ "$p" -le 65000 ] || usage_error "bad port number '$p'"
    done
    check_state_dir
}

# unsafe_dir PATH [sticky-ok]: prints why PATH may not hold root's state (nothing when it may):
# a symlink, not owned by root, or writable by group/others (a sticky parent is fine).
unsafe_dir() {
    local d="$1" sticky_ok="${2:-}" owner mode
    [ -L "$d" ] && { printf '%s is a symlink' "$d"; return 0; }
    [ -d "$d" ] || { printf '%s is not a directory' "$d"; return 0; }
    read -r owner mode < <(stat -c '%u %a' -- "$d") || { printf 'cannot stat %s' "$d"; return 0; }
    [ "$owner" = 0 ] || { printf '%s is owned by uid %s, not root' "$d" "$owner"; return 0; }
    mode=$((8#$mode))
    if (( mode & 8#022 )) && ! { [ -n "$sticky_ok" ] && (( mode & 8#1000 )); }; then
        printf '%s is writable by group or others (mode %o)' "$d" "$mode"
    fi
    return 0
}

# check_state_dir [create]: refuse a state directory (or a parent) another user controls. Called
# before anything is read from or written into $DIR; with "create", a missing $DIR is made (755).
check_state_dir() {
    local d="$DIR" why sub
    local parent="${d%/*}"; parent="${parent:-/}"
    while [ "$parent" != / ]; do
        if [ -e "$parent" ] || [ -L "$parent" ]; then
            why=$(unsafe_dir "$(readlink -f -- "$parent")" sticky)
            [ -z "$why" ] || refuse "unsafe state directory $DIR: $why"
        fi
        parent="${parent%/*}"; parent="${parent:-/}"
    done
    if [ ! -e "$DIR" ] && [ ! -L "$DIR" ]; then
        [ "${1:-}" = create ] || return 0
        # Parents made here are root's and 755 (umask 022; mkdir -p -m would set the last only).
        (umask 022 && mkdir -p -- "${DIR%/*}") 2>/dev/null
        mkdir -m 755 -- "$DIR" 2>/dev/null || [ -d "$DIR" ] || refuse "cannot create $DIR"
    fi
    why=$(unsafe_dir "$DIR")
    [ -z "$why" ] || refuse "unsafe state directory: $why; remove it or set JT_CLUSTER_DIR to a directory only root can write"
    for sub in "$DIR/.lock" "$ETC" "$RUN" "$LOG" "$STATE" "$SSHDIR" "$DBDIR" "$ENV_FILE"; do
        [ -L "$sub" ] && refuse "unsafe state directory $DIR: $sub is a symlink"
    done
    return 0
}

take_lock() {
    check_state_dir create
    exec 9>>"$DIR/.lock"
    if flock -n 9; then return 0; fi
    say "Waiting for another '$PROG' run on $DIR to finish..."
    if ! flock -w 900 9; then
        STEP="lock"; fail "another '$PROG' is still running on $DIR (waited 15 min)"
    fi
}

munge_ok() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }
ctld_up() { timeout 10 scontrol ping 2>/dev/null | grep -q 'is UP'; }
sacct_ok() { timeout 20 sacct -n -X -S now-1minutes -o JobID >/dev/null 2>&1; }

ssh_cmd() {
    timeout 20 ssh -n -F /dev/null -i "$SSHDIR/id_ed25519" \
        -o UserKnownHostsFile="$SSHDIR/known_hosts" -o StrictHostKeyChecking=yes \
        -o BatchMode=yes -o IdentitiesOnly=yes -o IdentityAgent=none -o ConnectTimeout=5 \
        -o LogLevel=ERROR -p "$SSH_PORT" root@127.0.0.1 "$@"
}

# count_nodes MODE: MODE=idle counts idle nodes, MODE=up counts responding usable nodes
count_nodes() {
    timeout 10 sinfo -h -N -p debug -o '%N %T' 2>/dev/null | awk -v mode="$1" '
        { st = $2 }
        st ~ /[*~#!%$@^-]$/ { next }               # not responding / powering / rebooting
        mode == "idle" && st == "idle" { n++ ; next }
        mode == "up" && st ~ /^(idle|mixed|allocated|completing)$/ { n++ }
        END { print n + 0 }'
}

# wait_nodes MODE N TIMEOUT
wait_nodes() {
    local mode="$1" want="$2" timeout="$3" t0 have=0
    t0=$(date +%s)
    while :; do
        have=$(count_nodes "$mode")
        [ "$have" -ge "$want" ] && return 0
        [ $(($(date +%s) - t0)) -ge "$timeout" ] && break
        sleep 0.3
    done
    WAIT_DETAIL="only $have of $want nodes $mode after ${timeout}s; sinfo says: $(timeout 10 sinfo -h -N -o '%N=%T' 2>&1 | tr '\n' ' ' | cut -c1-400)"
    return 1
}

# ---------------------------------------------------------------------------------------------
# packages

ensure_packages() {
    local missing=() p
    for p in "${PKGS[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    for p in "${BINS[@]}"; do
        command -v "$p" >/dev/null 2>&1 || { missing+=("($p)"); }
    done
    [ -x /usr/sbin/sshd ] || missing+=("(sshd)")
    step "Checking packages" "$LOG/apt.log"
    if [ ${#missing[@]} -eq 0 ]; then ok "all installed"; return; fi
    ok "missing: ${missing[*]}"

    step "Installing ${PKGS[*]}" "$LOG/apt.log"
    # Keep the packages' own services from starting (we run our own instances).
    local made_policy=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\n# temporary, created by jupyter-tiers sandbox cluster.sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        made_policy=1
        trap 'rm -f /usr/sbin/policy-rc.d' EXIT
    fi
    export DEBIAN_FRONTEND=noninteractive
    local aptopts=(-q -o DPkg::Lock::Timeout=600 -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
    local tries rc=1
    for tries in 1 2 3; do
        { printf '\n=== %s apt-get update (try %s)\n' "$(date '+%F %T')" "$tries"
          apt-get "${aptopts[@]}" update; } >>"$LOG/apt.log" 2>&1 </dev/null &&
        { printf '\n=== %s apt-get install (try %s)\n' "$(date '+%F %T')" "$tries"
          apt-get "${aptopts[@]}" install -y "${PKGS[@]}"; } >>"$LOG/apt.log" 2>&1 </dev/null &&
        { rc=0; break; }
        sleep $((tries * 5))
    done
    if [ "$made_policy" = 1 ]; then rm -f /usr/sbin/policy-rc.d; trap - EXIT; fi
    [ "$rc" = 0 ] || fail "apt-get could not install ${PKGS[*]}"
    hash -r
    for p in "${BINS[@]}"; do
        command -v "$p" >/dev/null 2>&1 || fail "'$p' is still missing after installing the packages"
    done
    ok
}

# ---------------------------------------------------------------------------------------------
# configuration files

node_range() { if [ "$1" -eq "$2" ]; then printf 'node%s' "$1"; else printf 'node[%s-%s]' "$1" "$2"; fi; }

gen_slurm_conf() {
    local n="$1" c="$2" k
    cat <<EOF
# Generated by jupyter-tiers sandbox cluster.sh -- rewritten on every "up"; do not edit.
# jtbox shape: nodes=$n cpus=$c
ClusterName=$CLUSTER_NAME
SlurmctldHost=localhost
SlurmctldPort=$CTLD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# A requeued job may start again only cred_expire+1 s later (slurm.conf(5), AuthInfo; default 120 s,
# which every requeue test and a preempted student's job would wait out). Step credentials reach
# the slurmds over loopback, far inside 30 s even on a loaded machine.
AuthInfo=cred_expire=30
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/slurmd/%n
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd-%n.pid
SlurmctldLogFile=$LOG/slurmctld.log
SlurmdLogFile=$LOG/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=5,batch_sched_delay=0
TopologyPlugin=topology/tree
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=5
MinJobAge=300
InactiveLimit=0
CompleteWait=0
SlurmctldTimeout=60
SlurmdTimeout=300
MessageTimeout=10
UnkillableStepTimeout=60
PropagateResourceLimits=NONE
MailProg=/bin/true
TmpFS=/tmp
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$DBD_PORT
# Only users with an association (root; students added by "sandbox add-user") may submit.
AccountingStorageEnforce=associations
# A student sees their own jobs only (squeue, scontrol); root sees all.
PrivateData=jobs
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30
JobCompType=jobcomp/none
# Preemption (tests, teaching labs): a job in partition "preemptible" (the same nodes, tier 1)
# is requeued when a job of the default partition (tier 10) needs its nodes; jobs of the default
# partition never preempt one another, so its behaviour is unchanged.
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
EOF
    for ((k = 1; k <= n; k++)); do
        printf 'NodeName=node%d NodeHostname=localhost NodeAddr=127.0.0.1 Port=%d CPUs=%d Boards=1 SocketsPerBoard=1 CoresPerSocket=%d ThreadsPerCore=1 RealMemory=4096 State=UNKNOWN\n' \
            "$k" $((SLURMD_PORT_BASE + k)) "$c" "$c"
    done
    printf 'PartitionName=debug Nodes=%s Default=YES MaxTime=02:00:00 State=UP PriorityTier=10\n' "$(node_range 1 "$n")"
    printf 'PartitionName=preemptible Nodes=%s MaxTime=02:00:00 State=UP PriorityTier=1 PreemptMode=REQUEUE\n' "$(node_range 1 "$n")"
}

gen_topology_conf() {
    local n="$1" half=$(($1 / 2))
    printf '# Generated by jupyter-tiers sandbox cluster.sh: two leaf switches under one spine.\n'
    if [ "$half" -ge 1 ]; then
        printf 'SwitchName=leaf1 Nodes=%s\n' "$(node_range 1 "$half")"
        printf 'SwitchName=leaf2 Nodes=%s\n' "$(node_range $((half + 1)) "$n")"
        printf 'SwitchName=spine Switches=leaf1,leaf2\n'
    else
        printf 'SwitchName=leaf1 Nodes=node1\n'
        printf 'SwitchName=spine Switches=leaf1\n'
    fi
}

gen_slurmdbd_conf() {
    cat <<EOF
# Generated by jupyter-tiers sandbox cluster.sh -- do not edit.
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=root
DebugLevel=info
LogFile=$LOG/slurmdbd.log
PidFile=$RUN/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=$(cat "$ETC/db.pass")
StorageLoc=slurm_acct_db
# sacct: a student sees their own jobs only.
PrivateData=jobs
EOF
}

gen_sshd_config() {
    cat <<EOF
# Generated by jupyter-tiers sandbox cluster.sh -- do not edit.
Port $SSH_PORT
ListenAddress 127.0.0.1
HostKey $SSHDIR/ssh_host_ed25519_key
PidFile $RUN/sshd.pid
# One root-owned file per login name: a key authorises its own user only (sandbox add-user).
AuthorizedKeysFile $SSHDIR/authorized_keys.d/%u
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
StrictModes yes
PrintMotd no
X11Forwarding no
AllowTcpForwarding yes
Subsystem sftp internal-sftp
SetEnv SLURM_CONF=$CONF PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
LogLevel INFO
EOF
}

# install_file NEW DEST MODE -> 0 if DEST changed
install_file() {
    local new="$1" dest="$2" mode="$3"
    if [ -f "$dest" ] && cmp -s "$new" "$dest"; then rm -f "$new"; return 1; fi
    chmod "$mode" "$new" && mv -f "$new" "$dest"
    return 0
}

# ---------------------------------------------------------------------------------------------
# components

prepare_dirs() {
    step "Preparing $DIR"
    mkdir -p "$DIR" "$ETC" "$RUN" "$LOG" "$STATE/ctld" "$STATE/slurmd" "$SSHDIR" "$DBDIR" \
        "$RUN/munge" "$RUN/mysql" || fail "cannot create directories under $DIR"
    chmod 755 "$DIR" "$ETC" "$RUN" "$LOG" "$STATE" "$SSHDIR"
    chown munge:munge "$RUN/munge" && chown mysql:mysql "$RUN/mysql" "$DBDIR" && chmod 750 "$DBDIR" ||
        fail "cannot hand directories to the munge/mysql users"
    touch "$STARTUP_LOG" "$LOG/munged.log" "$LOG/mariadb.log"
    chown munge:munge "$LOG/munged.log"; chmod 640 "$LOG/munged.log"
    chown mysql:mysql "$LOG/mariadb.log"; chmod 640 "$LOG/mariadb.log"
    if ! runuser -u mysql -- test -w "$DBDIR"; then
        fail "the mysql user cannot write $DBDIR (is a parent directory of JT_CLUSTER_DIR private?)"
    fi
    if [ ! -s "$ETC/db.pass" ]; then
        (umask 077; head -c 64 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 24 >"$ETC/db.pass")
    fi
    chmod 600 "$ETC/db.pass"
    ok
}

start_munge() {
    step "Starting munged (authentication)" "$LOG/munged.log" "$STARTUP_LOG"
    local pid
    if pid=$(pid_alive "$RUN/munge/munged.pid" munged) && munge_ok; then ok "already running (pid $pid)"; return; fi
    if munge_ok; then ok "using the munged that was already running on this machine"; return; fi
    if [ ! -s /etc/munge/munge.key ]; then
        if command -v mungekey >/dev/null 2>&1; then
            runuser -u munge -- mungekey --create --keyfile=/etc/munge/munge.key >>"$STARTUP_LOG" 2>&1
        else
            dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 2>/dev/null
        fi
        chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key
    fi
    mkdir -p /run/munge && chown munge:munge /run/munge && chmod 755 /run/munge
    note_startup munged
    launch runuser -u munge -- /usr/sbin/munged --log-file="$LOG/munged.log" --pid-file="$RUN/munge/munged.pid" ||
        fail "munged refused to start"
    local i
    for ((i = 0; i < 100; i++)); do munge_ok && break; sleep 0.1; done
    munge_ok || fail "munge -n | unmunge does not work after starting munged"
    ok "pid $(pid_alive "$RUN/munge/munged.pid" munged || echo '?')"
}

mysql_root() { mariadb --no-defaults -S "$DB_SOCK" -u root; }
db_ping() { mariadb-admin --no-defaults -S "$DB_SOCK" -u root --connect-timeout=2 ping >/dev/null 2>&1; }

start_mariadb() {
    step "Starting MariaDB (127.0.0.1:$DB_PORT)" "$LOG/mariadb.log" "$STARTUP_LOG"
    local pid i
    if pid=$(pid_alive "$RUN/mysql/mariadbd.pid" mariadbd) && db_ping; then
        ensure_db_user; ok "already running (pid $pid)"; return
    fi
    if [ -n "${pid:-}" ]; then stop_pid "$pid" mariadbd 30; fi
    port_busy "$DB_PORT" && fail "port $DB_PORT is already in use by another program (set JT_DB_PORT)"
    mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld && chmod 755 /run/mysqld
    if [ ! -d "$DBDIR/mysql" ]; then
        note_startup mariadb-install-db
        mariadb-install-db --no-defaults --user=mysql --datadir="$DBDIR" \
            --auth-root-authentication-method=socket --skip-test-db --skip-name-resolve \
            >>"$LOG/mariadb.log" 2>&1 </dev/null 9>&- || { STEP_LOGS=("$LOG/mariadb.log"); fail "mariadb-install-db failed"; }
    fi
    rm -f "$DB_SOCK"
    note_startup mariadbd
    ( detach_exec setsid /usr/sbin/mariadbd --no-defaults --user=mysql --datadir="$DBDIR" \
        --socket="$DB_SOCK" --port="$DB_PORT" --bind-address=127.0.0.1 \
        --pid-file="$RUN/mysql/mariadbd.pid" --log-error="$LOG/mariadb.log" \
        --skip-name-resolve --innodb-buffer-pool-size=256M --innodb-log-file-size=64M \
        --innodb-lock-wait-timeout=900 --max-connections=200 ) &
    pid=$!
    for ((i = 0; i < 600; i++)); do
        db_ping && break
        proc_running "$pid" || fail "mariadbd exited during startup"
        sleep 0.1
    done
    db_ping || fail "MariaDB did not answer on $DB_SOCK within 60s"
    ensure_db_user
    ok "pid $(pid_alive "$RUN/mysql/mariadbd.pid" mariadbd || echo "$pid")"
}

ensure_db_user() {
    local pw; pw=$(cat "$ETC/db.pass")
    mysql_root >>"$STARTUP_LOG" 2>&1 <<EOF || fail "could not create the slurm database user"
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$pw';
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$pw';
ALTER USER 'slurm'@'localhost' IDENTIFIED BY '$pw';
ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$pw';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
FLUSH PRIVILEGES;
EOF
}

start_slurmdbd() {
    local changed="$1" pid i
    step "Starting slurmdbd (accounting)" "$LOG/slurmdbd.log" "$STARTUP_LOG"
    if pid=$(pid_alive "$RUN/slurmdbd.pid" slurmdbd); then
        if [ "$changed" = 1 ]; then
            stop_pid "$pid" slurmdbd 30
        else
            ok "already running (pid $pid)"; return
        fi
    fi
    port_busy "$DBD_PORT" && fail "port $DBD_PORT is already in use by another program (set JT_SLURMDBD_PORT)"
    note_startup slurmdbd
    launch slurmdbd || fail "slurmdbd refused to start"
    for ((i = 0; i < 600; i++)); do
        timeout 10 sacctmgr -n -P show cluster format=cluster >/dev/null 2>&1 && break
        if [ "$i" -gt 30 ] && ! pid_alive "$RUN/slurmdbd.pid" slurmdbd >/dev/null; then
            fail "slurmdbd exited during startup"
        fi
        sleep 0.2
    done
    timeout 10 sacctmgr -n -P show cluster format=cluster >/dev/null 2>&1 ||
        fail "slurmdbd did not answer sacctmgr within 120s"
    ok "pid $(pid_alive "$RUN/slurmdbd.pid" slurmdbd || echo '?')"
}

ensure_accounting() {
    step "Registering cluster $CLUSTER_NAME in accounting" "$LOG/slurmdbd.log" "$STARTUP_LOG"
    local out
    if ! timeout 20 sacctmgr -n -P show cluster format=cluster 2>>"$STARTUP_LOG" | grep -qx "$CLUSTER_NAME"; then
        out=$(timeout 30 sacctmgr -i add cluster "$CLUSTER_NAME" 2>&1) || fail "sacctmgr add cluster: $out"
    fi
    if ! timeout 20 sacctmgr -n -P show assoc where cluster="$CLUSTER_NAME" user=root format=user 2>>"$STARTUP_LOG" | grep -qx root; then
        timeout 30 sacctmgr -i add account root cluster="$CLUSTER_NAME" >>"$STARTUP_LOG" 2>&1
        out=$(timeout 30 sacctmgr -i add user root account=root cluster="$CLUSTER_NAME" 2>&1) ||
            fail "sacctmgr add user root: $out"
    fi
    ok
}

start_ctld() {
    local pid i
    if pid=$(pid_alive "$RUN/slurmctld.pid" slurmctld) && ctld_up; then return 0; fi
    [ -n "${pid:-}" ] && stop_pid "$pid" slurmctld 30
    port_busy "$CTLD_PORT" && fail "port $CTLD_PORT is already in use by another program (set JT_SLURMCTLD_PORT)"
    note_startup slurmctld
    launch slurmctld -f "$CONF" || fail "slurmctld refused to start"
    for ((i = 0; i < 600; i++)); do
        ctld_up && return 0
        if [ "$i" -gt 30 ] && ! pid_alive "$RUN/slurmctld.pid" slurmctld >/dev/null; then
            fail "slurmctld exited during startup"
        fi
        sleep 0.1
    done
    fail "slurmctld did not answer 'scontrol ping' within 60s"
}

stop_ctld_quiet() {
    local p stopped=1
    stop_pidfile "$RUN/slurmctld.pid" slurmctld 60 && stopped=0
    for p in $(our_procs slurmctld); do stop_pid "$p" slurmctld 30; stopped=0; done
    return $stopped
}

# start_slurmds N -> sets FRESH_SLURMDS=1 when no slurmd was running before
start_slurmds() {
    local n="$1" k pid started=0 running=0 port
    for ((k = 1; k <= n; k++)); do
        if pid_alive "$RUN/slurmd-node$k.pid" slurmd >/dev/null; then running=$((running + 1)); continue; fi
        port=$((SLURMD_PORT_BASE + k))
        port_busy "$port" && fail "port $port (node$k) is already in use by another program (set JT_SLURMD_PORT_BASE)"
        mkdir -p "$STATE/slurmd/node$k"
        note_startup "slurmd -N node$k"
        launch slurmd -f "$CONF" -N "node$k" || fail "slurmd -N node$k refused to start (see $LOG/slurmd-node$k.log)"
        started=$((started + 1))
    done
    FRESH_SLURMDS=0
    [ "$running" = 0 ] && FRESH_SLURMDS=1
    SLURMDS_STARTED=$started
}

stop_slurmds_quiet() {
    local pf p pids=() stopped=1
    for pf in "$RUN"/slurmd-*.pid; do
        [ -e "$pf" ] || continue
        if p=$(pid_alive "$pf" slurmd); then kill -TERM "$p" 2>/dev/null; pids+=("$p"); fi
        rm -f "$pf"
    done
    for p in $(our_procs slurmd); do kill -TERM "$p" 2>/dev/null; pids+=("$p"); done
    for p in "${pids[@]}"; do stop_pid "$p" slurmd 20; stopped=0; done
    return $stopped
}

cancel_all_jobs() {
    local ids i
    ctld_up || return 0
    ids=$(timeout 10 squeue -h -o %A 2>/dev/null | tr '\n' ' ')
    [ -n "${ids// /}" ] || return 0
    # shellcheck disable=SC2086
    timeout 20 scancel $ids >>"$STARTUP_LOG" 2>&1
    for ((i = 0; i < 100; i++)); do
        [ -z "$(timeout 10 squeue -h -o %A 2>/dev/null)" ] && break
        sleep 0.2
    done
    CANCELLED="${ids% }"
}

start_sshd() {
    local changed="$1" pid i
    step "Starting sshd (127.0.0.1:$SSH_PORT)" "$LOG/sshd.log" "$STARTUP_LOG"
    if pid=$(pid_alive "$RUN/sshd.pid" sshd); then
        if [ "$changed" = 1 ]; then stop_pid "$pid" sshd 10; else
            ssh_cmd true >/dev/null 2>&1 && { ok "already running (pid $pid)"; return; }
            stop_pid "$pid" sshd 10
        fi
    fi
    port_busy "$SSH_PORT" && fail "port $SSH_PORT is already in use by another program (set JT_SSH_PORT)"
    mkdir -p /run/sshd && chmod 755 /run/sshd
    local terr
    terr=$(/usr/sbin/sshd -t -f "$ETC/sshd_config" 2>&1) || fail "sshd rejects its config: $terr"
    note_startup sshd
    launch /usr/sbin/sshd -f "$ETC/sshd_config" -E "$LOG/sshd.log" || fail "sshd refused to start"
    for ((i = 0; i < 100; i++)); do
        ssh_cmd true >/dev/null 2>&1 && break
        sleep 0.2
    done
    if ! ssh_cmd true >/dev/null 2>&1; then
        local why; why=$(ssh_cmd true 2>&1 | tail -n 3 | tr '\n' ' ')
        grep -q '^root:!' /etc/shadow 2>/dev/null && why="$why (root's account is locked in /etc/shadow: sshd with UsePAM no refuses locked accounts)"
        fail "cannot log in with ssh as root@127.0.0.1:$SSH_PORT: $why"
    fi
    ok "pid $(pid_alive "$RUN/sshd.pid" sshd || echo '?')"
}

ensure_ssh_keys() {
    if [ ! -s "$SSHDIR/ssh_host_ed25519_key" ]; then
        rm -f "$SSHDIR/ssh_host_ed25519_key" "$SSHDIR/ssh_host_ed25519_key.pub"
        ssh-keygen -q -t ed25519 -N '' -C "jtbox-sandbox-host" -f "$SSHDIR/ssh_host_ed25519_key" </dev/null ||
            fail "ssh-keygen (host key) failed"
    fi
    if [ ! -s "$SSHDIR/id_ed25519" ]; then
        rm -f "$SSHDIR/id_ed25519" "$SSHDIR/id_ed25519.pub"
        ssh-keygen -q -t ed25519 -N '' -C "jtbox-sandbox-client" -f "$SSHDIR/id_ed25519" </dev/null ||
            fail "ssh-keygen (client key) failed"
    fi
    chmod 600 "$SSHDIR/ssh_host_ed25519_key" "$SSHDIR/id_ed25519"
    cp "$SSHDIR/id_ed25519.pub" "$SSHDIR/authorized_keys.new"
    install_file "$SSHDIR/authorized_keys.new" "$SSHDIR/authorized_keys" 644 || true
    mkdir -p "$SSHDIR/authorized_keys.d" && chmod 755 "$SSHDIR/authorized_keys.d"
    cp "$SSHDIR/id_ed25519.pub" "$SSHDIR/authorized_keys.d/root.new"
    install_file "$SSHDIR/authorized_keys.d/root.new" "$SSHDIR/authorized_keys.d/root" 644 || true
    local hostpart="[127.0.0.1]:$SSH_PORT"
    [ "$SSH_PORT" = 22 ] && hostpart=127.0.0.1
    awk -v h="$hostpart" '{ print h, $1, $2 }' "$SSHDIR/ssh_host_ed25519_key.pub" >"$SSHDIR/known_hosts.new"
    install_file "$SSHDIR/known_hosts.new" "$SSHDIR/known_hosts" 644 || true
}

write_env() {
    cat >"$ENV_FILE.new" <<EOF
JT_SSH_HOST=127.0.0.1
JT_SSH_PORT=$SSH_PORT
JT_SSH_USER=root
JT_SSH_KEY=$SSHDIR/id_ed25519
JT_KNOWN_HOSTS=$SSHDIR/known_hosts
SLURM_CONF=$CONF
JT_CLUSTER_NODES=$1
JT_CLUSTER_CPUS=$2
JT_CLUSTER_DIR=$DIR
JT_CLUSTER_NAME=$CLUSTER_NAME
EOF
    install_file "$ENV_FILE.new" "$ENV_FILE" 644 || true
}

conf_shape() { sed -n 's/^# jtbox shape: nodes=\([0-9]*\) cpus=\([0-9]*\)$/\1 \2/p' "$1" 2>/dev/null; }

# ---------------------------------------------------------------------------------------------
# health

# health_check N FULL: FULL=1 also runs a 2-node job and checks sacct records it
health_check() {
    local n="$1" full="$2" out jobid st i nn
    step "Health: munge round trip" "$LOG/munged.log"
    munge_ok || fail "munge -n | unmunge failed"
    ok
    step "Health: slurmctld answers" "$LOG/slurmctld.log"
    ctld_up || fail "scontrol ping does not report UP"
    ok
    if [ "$full" = 1 ]; then
        step "Health: sinfo shows $n nodes idle" "$LOG/slurmctld.log" "$LOG/slurmd-node1.log"
        wait_nodes idle "$n" 90 || fail "$WAIT_DETAIL"
    else
        step "Health: sinfo shows $n nodes up" "$LOG/slurmctld.log" "$LOG/slurmd-node1.log"
        wait_nodes up "$n" 30 || fail "$WAIT_DETAIL"
    fi
    ok
    step "Health: sacct works" "$LOG/slurmdbd.log" "$LOG/mariadb.log"
    out=$(timeout 20 sacct -n -X -S now-1minutes -o JobID 2>&1) || fail "sacct failed: $out"
    ok
    step "Health: ssh root@127.0.0.1:$SSH_PORT sinfo" "$LOG/sshd.log"
    out=$(ssh_cmd sinfo -h 2>&1) || fail "ssh ... sinfo -h failed: $out"
    [ -n "$out" ] || fail "ssh ... sinfo -h printed nothing"
    ok
    [ "$full" = 1 ] || return 0
    nn=2; [ "$n" -lt 2 ] && nn=1
    step "Health: srun -N$nn job completes" "$LOG/slurmctld.log" "$LOG/slurmd-node1.log" "$LOG/slurmd-node2.log"
    out=$(cd / && timeout 90 srun -N"$nn" --ntasks-per-node=1 -t 1 -J jt-health --kill-on-bad-exit=1 \
        printenv SLURM_JOB_ID SLURMD_NODENAME 2>&1) || fail "srun -N$nn failed: $(printf '%s' "$out" | tail -n 5 | tr '\n' ' ')"
    jobid=$(printf '%s\n' "$out" | grep -E '^[0-9]+$' | head -n1)
    [ -n "$jobid" ] || fail "srun printed no job id: $out"
    ok "job $jobid on $(printf '%s\n' "$out" | grep '^node' | sort -u | tr '\n' ' ' | sed 's/ $//')"
    step "Health: sacct reports job $jobid COMPLETED" "$LOG/slurmdbd.log" "$LOG/slurmctld.log"
    for ((i = 0; i < 100; i++)); do
        st=$(timeout 10 sacct -n -X -P -j "$jobid" -o State 2>/dev/null | head -n1)
        [ "$st" = COMPLETED ] && break
        sleep 0.2
    done
    [ "$st" = COMPLETED ] || fail "sacct says '${st:-nothing}' for job $jobid after 20s"
    # the job's nodes go back to idle
    wait_nodes idle "$n" 30 || fail "$WAIT_DETAIL"
    ok
}

# ---------------------------------------------------------------------------------------------
# commands

cmd_up() {
    local nodes=4 cpus=8
    while [ $# -gt 0 ]; do
        case "$1" in
            --nodes | -n) [ $# -ge 2 ] || usage_error "$1 needs a number"; nodes="$2"; shift 2 ;;
            --nodes=*) nodes="${1#*=}"; shift ;;
            --cpus | -c) [ $# -ge 2 ] || usage_error "$1 needs a number"; cpus="$2"; shift 2 ;;
            --cpus=*) cpus="${1#*=}"; shift ;;
            -h | --help) usage; exit 0 ;;
            *) usage_error "unknown option for up: $1" ;;
        esac
    done
    [[ "$nodes" =~ ^[0-9]+$ ]] && [ "$nodes" -ge 1 ] && [ "$nodes" -le 128 ] || usage_error "--nodes must be 1..128 (got '$nodes')"
    [[ "$cpus" =~ ^[0-9]+$ ]] && [ "$cpus" -ge 1 ] && [ "$cpus" -le 256 ] || usage_error "--cpus must be 1..256 (got '$cpus')"
    preflight
    take_lock
    say "Bringing up sandbox Slurm cluster '$CLUSTER_NAME': $nodes nodes x $cpus CPUs (state in $DIR)"
    mkdir -p "$LOG"
    migrate_old_dir
    ensure_packages
    prepare_dirs

    # configs: written to *.new, installed only when they differ
    local slurm_changed=0 topo_changed=0 dbd_changed=0 sshd_changed=0 old_shape
    old_shape=$(conf_shape "$CONF")
    gen_slurm_conf "$nodes" "$cpus" >"$CONF.new"
    install_file "$CONF.new" "$CONF" 644 && slurm_changed=1
    gen_topology_conf "$nodes" >"$ETC/topology.conf.new"
    install_file "$ETC/topology.conf.new" "$ETC/topology.conf" 644 && topo_changed=1
    (umask 077; gen_slurmdbd_conf >"$ETC/slurmdbd.conf.new")
    install_file "$ETC/slurmdbd.conf.new" "$ETC/slurmdbd.conf" 600 && dbd_changed=1
    gen_sshd_config >"$ETC/sshd_config.new"
    install_file "$ETC/sshd_config.new" "$ETC/sshd_config" 644 && sshd_changed=1
    ensure_ssh_keys

    start_munge
    start_mariadb
    start_slurmdbd "$dbd_changed"
    ensure_accounting

    local pid ctld_was_up=0 reconfigure=0 out
    if pid=$(pid_alive "$RUN/slurmctld.pid" slurmctld); then ctld_was_up=1; fi
    if [ "$slurm_changed" = 1 ] && [ "$topo_changed" = 0 ] && [ "$old_shape" = "$nodes $cpus" ] &&
        [ "$ctld_was_up" = 1 ]; then
        # Same nodes, other settings: a new slurmctld reads them and the nodes are told to
        # reread theirs; running jobs survive (other users' tests may be running).
        step "Settings changed: restarting slurmctld (jobs are kept)" "$LOG/slurmctld.log"
        stop_ctld_quiet
        ctld_was_up=0
        reconfigure=1
        ok
    elif [ "$slurm_changed" = 1 ] || [ "$topo_changed" = 1 ]; then
        if [ "$ctld_was_up" = 1 ] || [ -n "$(our_procs slurmd)" ] || ls "$RUN"/slurmd-*.pid >/dev/null 2>&1; then
            step "Reshaping ${old_shape:+$(printf "%sx%s" "${old_shape% *}" "${old_shape#* }") }-> ${nodes}x$cpus: stopping Slurm" "$LOG/slurmctld.log"
            CANCELLED=""
            cancel_all_jobs
            stop_slurmds_quiet
            stop_ctld_quiet
            ctld_was_up=0
            ok "${CANCELLED:+cancelled jobs $CANCELLED}"
        fi
    fi

    step "Starting slurmctld" "$LOG/slurmctld.log" "$STARTUP_LOG"
    if [ "$ctld_was_up" = 1 ] && ctld_up; then ok "already running (pid $pid)"; else
        start_ctld; ok "pid $(pid_alive "$RUN/slurmctld.pid" slurmctld || echo '?')"; ctld_was_up=0
    fi

    step "Starting $nodes slurmd (node1..node$nodes)" "$LOG/slurmd-node1.log" "$STARTUP_LOG"
    start_slurmds "$nodes"
    # stray slurmd beyond the requested shape (e.g. left from a bigger shape)
    local pf k
    for pf in "$RUN"/slurmd-node*.pid; do
        [ -e "$pf" ] || continue
        k=${pf##*/slurmd-node}; k=${k%.pid}
        if [[ "$k" =~ ^[0-9]+$ ]] && [ "$k" -gt "$nodes" ]; then stop_pidfile "$pf" slurmd 20; fi
    done
    if [ "$SLURMDS_STARTED" = 0 ]; then ok "all already running"; else ok "started $SLURMDS_STARTED"; fi

    if [ "$FRESH_SLURMDS" = 1 ]; then
        # No slurmd survived from before: jobs still in the saved state are orphans.
        CANCELLED=""
        cancel_all_jobs
        [ -n "$CANCELLED" ] && say "  cancelled stale jobs from a previous run: ${CANCELLED% }"
    fi

    step "Waiting for $nodes nodes to register" "$LOG/slurmctld.log" "$LOG/slurmd-node1.log"
    wait_nodes up "$nodes" 90 || fail "$WAIT_DETAIL"
    ok
    if [ "$reconfigure" = 1 ]; then
        step "Nodes reread the settings (scontrol reconfigure)" "$LOG/slurmctld.log"
        out=$(timeout 60 scontrol reconfigure 2>&1) || fail "scontrol reconfigure: $out"
        ok
    fi

    start_sshd "$sshd_changed"
    write_env "$nodes" "$cpus"

    # Full check (all nodes idle + a real 2-node job) when the nodes were (re)started and so run
    # no jobs; a quick check when things were already running (users' jobs may occupy nodes).
    health_check "$nodes" "$FRESH_SLURMDS"

    say "Cluster '$CLUSTER_NAME' is up: $nodes nodes x $cpus CPUs, partition debug, ssh root@127.0.0.1 -p $SSH_PORT ($(since "$T_START")s)"
    say "Connection settings: $ENV_FILE   (load with: set -a; . $ENV_FILE; set +a)"
}

# migrate_old_dir: a cluster left in the old default location (a world-writable parent) is
# stopped there and removed, so this one can take its ports. Only root's own directory is touched.
migrate_old_dir() {
    [ -z "${JT_CLUSTER_DIR:-}" ] && [ "$DIR" = "$DEFAULT_DIR" ] || return 0
    [ -e "$OLD_DEFAULT_DIR" ] || [ -L "$OLD_DEFAULT_DIR" ] || return 0
    step "Moving the cluster from $OLD_DEFAULT_DIR" "$STARTUP_LOG"
    local why
    why=$(unsafe_dir "$OLD_DEFAULT_DIR")
    if [ -n "$why" ]; then
        ok "left alone and not used: $why"
        return 0
    fi
    note_startup "down in $OLD_DEFAULT_DIR"
    JT_CLUSTER_DIR="$OLD_DEFAULT_DIR" bash "${BASH_SOURCE[0]}" down </dev/null >>"$STARTUP_LOG" 2>&1 ||
        fail "could not stop the cluster in $OLD_DEFAULT_DIR"
    rm -rf --one-file-system -- "$OLD_DEFAULT_DIR" || fail "could not remove $OLD_DEFAULT_DIR"
    ok "stopped there and removed"
}

cmd_down() {
    preflight
    if [ ! -d "$DIR" ]; then say "Nothing to stop: $DIR does not exist (the sandbox cluster was never started)."; return 0; fi
    take_lock
    local stopped=() pf
    if pid_alive "$RUN/slurmctld.pid" slurmctld >/dev/null; then
        step "Cancelling jobs" "$LOG/slurmctld.log"
        CANCELLED=""
        cancel_all_jobs
        ok "${CANCELLED:+cancelled $CANCELLED}"
    fi
    stop_pidfile "$RUN/sshd.pid" sshd 10 && stopped+=(sshd)
    stop_pidfile "$RUN/sshd-2fa.pid" jtbox-2fa-sshd 10 && stopped+=(sshd-2fa)   # twofactor.sh's second sshd
    stop_slurmds_quiet && stopped+=(slurmd)
    stop_ctld_quiet && stopped+=(slurmctld)
    stop_pidfile "$RUN/slurmdbd.pid" slurmdbd 30 && stopped+=(slurmdbd)
    stop_pidfile "$RUN/mysql/mariadbd.pid" mariadbd 60 && stopped+=(mariadb)
    stop_pidfile "$RUN/munge/munged.pid" munged 10 && stopped+=(munged)
    rm -f "$DB_SOCK"
    if [ ${#stopped[@]} -eq 0 ]; then
        say "Nothing was running; the sandbox cluster is already down."
    else
        say "Stopped: ${stopped[*]} ($(since "$T_START")s). Packages, configs, accounting data and logs stay in $DIR."
    fi
}

cmd_status() {
    local healthy=1 pid n=0 cpus=0 shape line
    preflight
    if [ -r "$ENV_FILE" ]; then
        SSH_PORT=$(sed -n 's/^JT_SSH_PORT=//p' "$ENV_FILE"); SSH_PORT=${SSH_PORT:-2299}
    fi
    shape=$(conf_shape "$CONF"); if [ -n "$shape" ]; then n=${shape% *}; cpus=${shape#* }; fi
    printf 'Sandbox Slurm cluster %s (state in %s)\n' "$CLUSTER_NAME" "$DIR"
    if [ ! -f "$CONF" ]; then printf '  not set up yet: run "%s up"\n' "$PROG"; return 1; fi
    _st() { # name pidfile comm
        local p
        if p=$(pid_alive "$2" "$3"); then printf '  %-10s running (pid %s)\n' "$1" "$p"
        else printf '  %-10s NOT running\n' "$1"; healthy=0; fi
    }
    if pid=$(pid_alive "$RUN/munge/munged.pid" munged); then printf '  %-10s running (pid %s)\n' munged "$pid"
    elif munge_ok; then printf '  %-10s running (not started by the sandbox)\n' munged
    else printf '  %-10s NOT running\n' munged; healthy=0; fi
    _st mariadb "$RUN/mysql/mariadbd.pid" mariadbd
    _st slurmdbd "$RUN/slurmdbd.pid" slurmdbd
    _st slurmctld "$RUN/slurmctld.pid" slurmctld
    local k up=0
    for ((k = 1; k <= n; k++)); do pid_alive "$RUN/slurmd-node$k.pid" slurmd >/dev/null && up=$((up + 1)); done
    printf '  %-10s %s of %s running (%s CPUs each)\n' slurmd "$up" "$n" "$cpus"
    [ "$up" = "$n" ] || healthy=0
    _st sshd "$RUN/sshd.pid" sshd
    if ctld_up; then
        printf '  sinfo:\n'
        timeout 10 sinfo 2>&1 | sed 's/^/    /'
        local cnt; cnt=$(count_nodes up)
        [ "$cnt" -ge "$n" ] || { printf '  only %s of %s nodes are up\n' "$cnt" "$n"; healthy=0; }
        printf '  jobs:       %s in queue\n' "$(timeout 10 squeue -h 2>/dev/null | wc -l)"
    else
        printf '  sinfo:      slurmctld does not answer\n'; healthy=0
    fi
    if sacct_ok; then printf '  sacct:      reachable\n'; else printf '  sacct:      NOT reachable\n'; healthy=0; fi
    # shellcheck disable=SC2016  # expanded by the remote shell
    if [ -s "$SSHDIR/id_ed25519" ] && line=$(ssh_cmd 'echo "$SLURM_CONF"' 2>&1) && [ "$line" = "$CONF" ]; then
        printf '  ssh:        root@127.0.0.1:%s reachable\n' "$SSH_PORT"
    else printf '  ssh:        root@127.0.0.1:%s NOT reachable\n' "$SSH_PORT"; healthy=0; fi
    printf '  env file:   %s\n' "$ENV_FILE"
    printf '  logs:       %s/\n' "$LOG"
    if [ "$healthy" = 1 ]; then printf 'healthy\n'; return 0; fi
    printf 'UNHEALTHY (run "%s up" to repair, or see the logs)\n' "$PROG"
    return 1
}

need_cluster() {
    [ -f "$CONF" ] || { printf '%s: the sandbox cluster is not set up (no %s); run "%s up" first\n' "$PROG" "$CONF" "$PROG" >&2; exit 1; }
    if [ "${1:-}" = running ] && [ -z "$(our_procs slurmd)" ]; then
        printf '%s: the sandbox cluster is down (no slurmd runs); run "%s up" first\n' "$PROG" "$PROG" >&2
        exit 1
    fi
}

cmd_stop_ctld() {
    preflight; need_cluster; take_lock
    step "Stopping slurmctld" "$LOG/slurmctld.log"
    if stop_ctld_quiet; then ok "jobs keep running on the nodes; state saved in $STATE/ctld"
    else ok "it was not running"; fi
}

cmd_start_ctld() {
    preflight; need_cluster running; take_lock
    local shape n
    shape=$(conf_shape "$CONF"); n=${shape% *}
    step "Starting slurmctld" "$LOG/slurmctld.log" "$STARTUP_LOG"
    if pid_alive "$RUN/slurmctld.pid" slurmctld >/dev/null && ctld_up; then ok "already running"
    else start_ctld; ok "pid $(pid_alive "$RUN/slurmctld.pid" slurmctld || echo '?')"; fi
    step "Waiting for $n nodes to respond" "$LOG/slurmctld.log"
    wait_nodes up "$n" 60 || fail "$WAIT_DETAIL"
    ok
}

cmd_restart_ctld() {
    preflight; need_cluster running; take_lock
    local shape n
    shape=$(conf_shape "$CONF"); n=${shape% *}
    step "Restarting slurmctld (jobs are kept)" "$LOG/slurmctld.log" "$STARTUP_LOG"
    stop_ctld_quiet
    start_ctld
    ok "pid $(pid_alive "$RUN/slurmctld.pid" slurmctld || echo '?')"
    step "Waiting for $n nodes to respond" "$LOG/slurmctld.log"
    wait_nodes up "$n" 60 || fail "$WAIT_DETAIL"
    ok
}

# node_arg NODE: a node of the current shape (node1..nodeN), else a usage error
node_arg() {
    local shape n k
    [[ "${1:-}" =~ ^node([1-9][0-9]{0,3})$ ]] || usage_error "give a node name like node2, not '${1:-}'"
    k=${BASH_REMATCH[1]}
    shape=$(conf_shape "$CONF"); n=${shape% *}
    [ -n "$n" ] && [ "$k" -le "$n" ] || usage_error "no node $1 in this cluster (node1..node${n:-?})"
}

# node_state NODE -> sinfo's state of one node (e.g. idle, down*, allocated), empty if unknown
node_state() { timeout 10 sinfo -h -N -n "$1" -o '%T' 2>/dev/null | head -n1; }

cmd_stop_node() {
    local node="$1" how="${2:-}" pid i
    preflight; need_cluster; node_arg "$node"
    [ -z "$how" ] || [ "$how" = --kill ] || usage_error "stop-node $node: unknown option '$how' (only --kill)"
    take_lock
    step "Stopping slurmd of $node${how:+ (SIGKILL)}" "$LOG/slurmd-$node.log"
    if ! pid=$(pid_alive "$RUN/slurmd-$node.pid" slurmd); then ok "it was not running"; return 0; fi
    if [ "$how" = --kill ]; then
        kill -KILL "$pid" 2>/dev/null
        for ((i = 0; i < 100; i++)); do proc_running "$pid" || break; sleep 0.1; done
        proc_running "$pid" && fail "slurmd $node (pid $pid) outlived SIGKILL"
    else
        stop_pid "$pid" slurmd 20 || fail "slurmd $node (pid $pid) did not stop"
    fi
    ok "pid $pid gone; its job steps run on until slurmctld gives the node up (SlurmdTimeout)"
}

cmd_start_node() {
    local node="$1" i st port
    preflight; need_cluster; node_arg "$node"; take_lock
    step "Starting slurmd of $node" "$LOG/slurmd-$node.log" "$STARTUP_LOG"
    if pid_alive "$RUN/slurmd-$node.pid" slurmd >/dev/null; then ok "already running"
    else
        port=$((SLURMD_PORT_BASE + ${node#node}))
        for ((i = 0; i < 100; i++)); do port_busy "$port" || break; sleep 0.1; done
        port_busy "$port" && fail "port $port ($node) is still in use"
        mkdir -p "$STATE/slurmd/$node"
        note_startup "slurmd -N $node"
        launch slurmd -f "$CONF" -N "$node" || fail "slurmd -N $node refused to start"
        for ((i = 0; i < 100; i++)); do pid_alive "$RUN/slurmd-$node.pid" slurmd >/dev/null && break; sleep 0.1; done
        ok "pid $(pid_alive "$RUN/slurmd-$node.pid" slurmd || echo '?')"
    fi
    ctld_up || { step "Resuming $node"; ok "slurmctld is down: it resumes the node when it is back"; return 0; }
    step "Resuming $node (scontrol update state=resume)" "$LOG/slurmctld.log" "$LOG/slurmd-$node.log"
    for ((i = 0; i < 600; i++)); do
        st=$(node_state "$node")
        case "$st" in
            idle | mixed | allocated | completing) ok "$st"; return 0 ;;
            down | drained | draining | drain | fail | failing)
                # set down by hand or given up by slurmctld: back into service (an error
                # "Invalid node state" means it left that state meanwhile: fine)
                timeout 10 scontrol update nodename="$node" state=resume >>"$STARTUP_LOG" 2>&1 ;;
        esac
        sleep 0.2
    done
    fail "$node is '$st' after 120s (sinfo -N -n $node)"
}

cmd_stop_dbd() {
    preflight; need_cluster; take_lock
    step "Stopping slurmdbd" "$LOG/slurmdbd.log"
    if stop_pidfile "$RUN/slurmdbd.pid" slurmdbd 30; then ok "sacct fails until start-dbd; slurmctld queues its records"
    else ok "it was not running"; fi
}

cmd_start_dbd() {
    preflight; need_cluster; take_lock
    start_slurmdbd 0
}

cmd_env() {
    if [ -r "$ENV_FILE" ]; then cat "$ENV_FILE"; return 0; fi
    printf '%s: no %s yet; run "%s up" first\n' "$PROG" "$ENV_FILE" "$PROG" >&2
    return 1
}

CMD="${1:-}"
[ $# -gt 0 ] && shift
case "$CMD" in
    up) cmd_up "$@" ;;
    down) [ $# -eq 0 ] || usage_error "down takes no arguments"; cmd_down ;;
    status) [ $# -eq 0 ] || usage_error "status takes no arguments"; cmd_status ;;
    restart-ctld) cmd_restart_ctld ;;
    stop-ctld) cmd_stop_ctld ;;
    start-ctld) cmd_start_ctld ;;
    stop-node) [ $# -ge 1 ] && [ $# -le 2 ] || usage_error "stop-node takes a node name and maybe --kill"
        cmd_stop_node "$@" ;;
    start-node) [ $# -eq 1 ] || usage_error "start-node takes one node name"; cmd_start_node "$1" ;;
    stop-dbd) [ $# -eq 0 ] || usage_error "stop-dbd takes no arguments"; cmd_stop_dbd ;;
    start-dbd) [ $# -eq 0 ] || usage_error "start-dbd takes no arguments"; cmd_start_dbd ;;
    env) cmd_env ;;
    -h | --help | help) usage ;;
    "") usage >&2; exit 2 ;;
    *) usage_error "unknown command '$CMD'" ;;
esac
