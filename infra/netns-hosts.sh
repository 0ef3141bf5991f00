#!/usr/bin/env bash
# Engine hosts as separate network hosts on this machine: network namespaces, each with a veth
# into one bridge in the root namespace, on a private /24 that no route leaves the machine by.
#
#   netns-hosts.sh up N      namespaces <prefix>-h1..hN: 10.213.<slot>.11.. ; the bridge holds .1
#   netns-hosts.sh cut NAME  the host's link goes down: its packets go nowhere, as a pulled cable
#   netns-hosts.sh restore NAME
#   netns-hosts.sh down      removes every namespace, veth and bridge of the prefix (idempotent)
#   netns-hosts.sh address NAME   prints the host's address
#
# KILN_TEST_SLOT (0–9) picks the subnet and, unless KILN_NETNS_PREFIX is set, the names
# (kiln<slot>-h1, bridge kiln<slot>-br), so suites of two checkouts never share hosts. The lanes of
# one suite (infra/test.sh: KILN_TEST_LANE 1–4, with a prefix of their own) have subnets
# 10.213.100 and up, above every slot's.
# Needs root (ip netns). Every command it runs is printed, so a test log shows how hosts were made and cut.
set -euo pipefail

slot="${KILN_TEST_SLOT:-0}"
[[ "$slot" =~ ^[0-9]$ ]] || { echo "KILN_TEST_SLOT must be one digit (got '$slot')" >&2; exit 2; }
prefix="${KILN_NETNS_PREFIX:-kiln$slot}"
# Interface names hold at most 15 characters: <prefix>-br and <prefix>-hNN.
[[ "$prefix" =~ ^[a-z0-9]{1,10}$ ]] || { echo "KILN_NETNS_PREFIX must be 1–10 lowercase letters or digits (got '$prefix')" >&2; exit 2; }
bridge="$prefix-br"
lane="${KILN_TEST_LANE:-0}"
[[ "$lane" =~ ^[0-4]$ ]] || { echo "KILN_TEST_LANE must be 0 to 4 (got '$lane')" >&2; exit 2; }
subnet="10.213.$slot"; [ "$lane" = 0 ] || subnet="10.213.$((100 + 4 * slot + lane - 1))"

run() {
  echo "+ $*"
  "$@"
}

host_index() {
  [[ "$1" =~ ^$prefix-h([0-9]{1,2})$ ]] || { echo "not a host of this set: '$1' (expected $prefix-hN)" >&2; exit 2; }
  echo "${BASH_REMATCH[1]}"
}

address() { echo "$subnet.$((10 + $(host_index "$1")))"; }

up() {
  local n="$1" i ns
  [[ "$n" =~ ^[0-9]{1,2}$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 50 ] || { echo "up takes a host count, 1–50 (got '$n')" >&2; exit 2; }
  if ! ip link show "$bridge" >/dev/null 2>&1; then
    run ip link add "$bridge" type bridge
    run ip addr add "$subnet.1/24" dev "$bridge"
  fi
  run ip link set "$bridge" up
  for i in $(seq 1 "$n"); do
    ns="$prefix-h$i"
    ip netns list | grep -qx "$ns\( .*\)\?" || run ip netns add "$ns"
    if ! ip link show "$ns" >/dev/null 2>&1; then
      run ip link add "$ns" type veth peer name eth0 netns "$ns"
      run ip link set "$ns" master "$bridge"
      run ip -n "$ns" addr add "$(address "$ns")/24" dev eth0
    fi
    run ip link set "$ns" up
    run ip -n "$ns" link set lo up
    run ip -n "$ns" link set eth0 up
    # Only the bridge's subnet is reachable: no default route, so nothing leaves the machine.
  done
}

down() {
  local ns
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^$prefix-h[0-9]+$" || true); do
    ip link show "$ns" >/dev/null 2>&1 && run ip link del "$ns"
    run ip netns del "$ns"
  done
  if ip link show "$bridge" >/dev/null 2>&1; then run ip link del "$bridge"; fi
}

case "${1:-}" in
  up) up "${2:?up N}" ;;
  cut) host_index "${2:?cut NAME}" >/dev/null && run ip link set "$2" down ;;
  restore) host_index "${2:?restore NAME}" >/dev/null && run ip link set "$2" up ;;
  down) down ;;
  address) address "${2:?address NAME}" ;;
  bridge-address) echo "$subnet.1" ;;
  *)
    echo "usage: $0 up N | cut NAME | restore NAME | down | address NAME | bridge-address" >&2
    exit 2
    ;;
esac
