#!/usr/bin/env bash
# A simulated network between ranks on one machine: W network namespaces (cfnet0..), each
# with one veth into a bridge (cfnetbr, 10.93.0.254/24) in this namespace, every rank's
# egress rate-limited. `commfuse bench ... --transport mpi --netns cfnet0,cfnet1` then runs
# rank r in cfnet<r>, so MPI's TCP traffic between ranks crosses the limited links (mpirun
# stays here and reaches its ranks over the bridge). Only the namespaces' own addresses are
# on these links: nothing else on the machine is routed through them.
#
# usage: bench/netns.sh up W RATE [DELAY]   e.g. up 2 10gbit 50us   (needs root: CAP_NET_ADMIN)
#        bench/netns.sh rate RATE [DELAY]   change every link's limit
#        bench/netns.sh down                remove everything this script made
#        bench/netns.sh check               exit 0 if namespaces can be made here
# `up` prints the variables to export and the --netns argument (eval-able lines). DELAY
# needs the netem qdisc; where the kernel lacks it, the links get a token bucket (tbf)
# rate limit only, and `up`/`rate` say so (CF_NETNS_QDISC=tbf).
set -euo pipefail

PREFIX=cfnet
BRIDGE=${PREFIX}br
SUBNET=10.93.0

die() { echo "netns.sh: $*" >&2; exit 1; }

namespaces() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${PREFIX}[0-9]+$" || true; }

# limit NS DEV RATE DELAY: netem (rate + delay) if the kernel has it, else tbf (rate only).
# Prints the qdisc used.
limit() {
  local ns=$1 dev=$2 rate=$3 delay=$4
  if ip netns exec "$ns" tc qdisc replace dev "$dev" root netem rate "$rate" delay "$delay" \
      limit 100000 2>/dev/null; then
    echo netem
  else
    # burst: at least one 64 KiB TCP segment train at 10+ Gbit/s without idling the link.
    ip netns exec "$ns" tc qdisc replace dev "$dev" root tbf rate "$rate" burst 4mb \
      latency 50ms
    echo tbf
  fi
}

down() {
  for ns in $(namespaces); do ip netns del "$ns"; done
  if ip link show "$BRIDGE" >/dev/null 2>&1; then ip link del "$BRIDGE"; fi
}

up() {
  local w=$1 rate=$2 delay=${3:-50us} qdisc=""
  [[ $w =~ ^[0-9]+$ && $w -ge 1 && $w -le 64 ]] || die "W must be 1..64, not '$w'"
  down
  ip link add "$BRIDGE" type bridge
  ip addr add "$SUBNET.254/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  local list=""
  for ((r = 0; r < w; ++r)); do
    local ns=$PREFIX$r
    ip netns add "$ns"
    ip link add "${PREFIX}v$r" type veth peer name "${PREFIX}h$r"
    ip link set "${PREFIX}v$r" netns "$ns"
    ip link set "${PREFIX}h$r" master "$BRIDGE"
    ip link set "${PREFIX}h$r" up
    ip -n "$ns" addr add "$SUBNET.$((r + 1))/24" dev "${PREFIX}v$r"
    ip -n "$ns" link set "${PREFIX}v$r" up
    ip -n "$ns" link set lo up
    qdisc=$(limit "$ns" "${PREFIX}v$r" "$rate" "$delay")
    list+=${list:+,}$ns
  done
  echo "# $w namespaces, each rank's egress limited to $rate ($qdisc$([[ $qdisc == netem ]] && echo ", delay $delay"))" >&2
  # mpirun's PMIx server must listen where the namespaces can reach it: on the bridge.
  echo "export PMIX_MCA_ptl_tcp_if_include=$BRIDGE"
  echo "export CF_NETNS=$list"
  echo "export CF_NETNS_QDISC=$qdisc"
}

rate() {
  local rate=$1 delay=${2:-50us} qdisc=""
  local all
  all=$(namespaces)
  [[ -n $all ]] || die "no namespaces: run 'up' first"
  for ns in $all; do qdisc=$(limit "$ns" "${PREFIX}v${ns#"$PREFIX"}" "$rate" "$delay"); done
  echo "# every link now $rate ($qdisc)" >&2
  echo "export CF_NETNS_QDISC=$qdisc"
}

check() {
  command -v ip >/dev/null || die "no 'ip' command (Debian: apt-get install iproute2)"
  command -v tc >/dev/null || die "no 'tc' command (Debian: apt-get install iproute2)"
  ip netns add "${PREFIX}probe" 2>/dev/null || die "cannot create a network namespace here \
(needs root / CAP_SYS_ADMIN and CAP_NET_ADMIN)"
  local ok=0
  if ip link add "${PREFIX}pa" type veth peer name "${PREFIX}pb" 2>/dev/null; then
    ip link set "${PREFIX}pa" netns "${PREFIX}probe" &&
      ip netns exec "${PREFIX}probe" tc qdisc add dev "${PREFIX}pa" root tbf rate 1gbit \
        burst 1mb latency 50ms 2>/dev/null && ok=1
    ip link del "${PREFIX}pb" 2>/dev/null || true
  fi
  ip netns del "${PREFIX}probe"
  [[ $ok == 1 ]] || die "cannot make a rate-limited veth pair here (veth or tbf missing)"
}

case ${1:-} in
  up) [[ $# -ge 3 ]] || die "usage: up W RATE [DELAY]"; up "$2" "$3" "${4:-50us}" ;;
  rate) [[ $# -ge 2 ]] || die "usage: rate RATE [DELAY]"; rate "$2" "${3:-50us}" ;;
  down) down ;;
  check) check ;;
  *) die "usage: $0 up W RATE [DELAY] | rate RATE [DELAY] | down | check" ;;
esac
