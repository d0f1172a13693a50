#!/usr/bin/env bash
# The walkthrough of docs/distributed.md ("Walkthrough"), as a script: the
# distributed mode on one machine — two workers and a controller on
# loopback over one PostgreSQL database, with TLS and a cluster token
# between them — running the counter example to completion, then the same
# counter as a streaming pipeline with a standby controller.
# internal/disttest/walkthrough_test.go runs this file as written against a
# throwaway PostgreSQL server.
#
# Needs weir on PATH, openssl, curl and jq, and
#   STORE         the store: postgres://USER@HOST:PORT/DB?sslmode=disable
#                 (sslmode=disable for a server on this machine without
#                 TLS; verify-full beyond it)
# Optional:
#   STREAM_STORE  the streaming pipeline's store (default: STORE's
#                 database, schema weir_stream; one schema holds one pipeline)
#   WORK          where certificates, token and logs go (default: a new
#                 temporary directory)
#   W1, W2        the workers' addresses (default 127.0.0.1:7001, :7002)
#   C1, C2        the controllers' admin addresses (default 127.0.0.1:7100, :7101)
set -euo pipefail

: "${STORE:?set STORE to a PostgreSQL URL, e.g. postgres://weir@127.0.0.1:5432/weir?sslmode=disable}"
if [[ -z "${STREAM_STORE:-}" ]]; then
	case "$STORE" in *\?*) STREAM_STORE="$STORE&weir_schema=weir_stream" ;; *) STREAM_STORE="$STORE?weir_schema=weir_stream" ;; esac
fi
WORK=${WORK:-$(mktemp -d)}
W1=${W1:-127.0.0.1:7001} W2=${W2:-127.0.0.1:7002}
C1=${C1:-127.0.0.1:7100} C2=${C2:-127.0.0.1:7101}
EXAMPLES=$(cd "$(dirname "$0")/.." && pwd)
cd "$WORK"
# Every process started here stops when the script ends.
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT

# await FILE TEXT: wait until a process's log FILE shows TEXT.
await() {
	for _ in $(seq 600); do
		grep -q "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	echo "no '$2' in $1:" >&2
	cat "$1" >&2
	return 1
}

step() { echo; echo "== $*"; }

step "1. Create the stores (once, and after every upgrade of weir)"
weir store init --store "$STORE"
weir store init --store "$STREAM_STORE"

step "2. A cluster token and certificates"
# The token: a secret every process of the cluster shares (mode 0600).
head -c 32 /dev/urandom | base64 >token
chmod 600 token
# A CA, and a certificate per process signed by it. Each certificate names
# what the others dial: here an IP address, so an IP subject alternative
# name (a DNS name when they dial names). serverAuth: it listens;
# clientAuth: it dials others that require client certificates
# (--tls-client-certs). The CA's key signs nothing else: keep it offline.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 365 \
	-subj "/CN=weir cluster CA" -keyout ca.key -out ca.pem 2>/dev/null
cert() { # cert NAME IP
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
		-subj "/CN=$1" -keyout "$1.key" -out "$1.csr" 2>/dev/null
	openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days 365 -out "$1.pem" \
		-extfile <(printf 'subjectAltName=IP:%s\nextendedKeyUsage=serverAuth,clientAuth\nkeyUsage=digitalSignature\nbasicConstraints=CA:FALSE\n' "$2") 2>/dev/null
	chmod 600 "$1.key"
}
for p in w1 w2 c1 c2; do cert $p 127.0.0.1; done
openssl verify -CAfile ca.pem w1.pem
tls() { echo --token-file token --tls-cert "$1.pem" --tls-key "$1.key" --tls-ca ca.pem --tls-client-certs; }
# The admin API: HTTPS with the controller's certificate, the token as a
# bearer token.
admin() { curl -sS --fail-with-body --cacert ca.pem -H "Authorization: Bearer $(cat token)" "https://$1$2"; }

step "3. The input: the counter example's queues, 1000 events over 10 keys"
weir queue create --store "$STORE" --partitions 2 events
weir queue create --store "$STORE" --partitions 2 counts
events() { # events N: N rows {"key": "k0".."k9"}
	for i in $(seq "$1"); do echo "{\"key\": \"k$((i % 10))\"}"; done
}
events 1000 | weir queue write --store "$STORE" events
weir queue list --store "$STORE"
# workers STORE LOG: workers w1 and w2 on STORE, logging to LOG1.log and
# LOG2.log; their PIDs in W1_PID and W2_PID.
workers() {
	weir worker --store "$1" --listen "$W1" --id w1 $(tls w1) >"${2}1.log" 2>&1 &
	W1_PID=$!
	weir worker --store "$1" --listen "$W2" --id w2 $(tls w2) >"${2}2.log" 2>&1 &
	W2_PID=$!
	await "${2}1.log" "listening on"
	await "${2}2.log" "listening on"
}
# stop_workers: a SIGTERM drains a worker (its jobs move to the others),
# and with no controller left to move anything a second one stops it at
# once; nothing is lost either way — a controller restarts every partition
# from its last commit.
stop_workers() {
	kill -TERM $W1_PID $W2_PID
	sleep 0.5
	kill -TERM $W1_PID $W2_PID 2>/dev/null || true
	wait $W1_PID $W2_PID || true
}
# key_counts STORE FILE [N]: each key's last count in STORE's counts
# queue, into FILE; every one of the 10 keys must have reached N (100).
key_counts() {
	weir queue read --store "$1" counts |
		jq -r -s 'group_by(.key)[] | "\(.[0].key) \(map(.count) | max)"' | tee "$2"
	[[ $(grep -c " ${3:-100}\$" "$2") == 10 ]]
}

step "4. Two workers and a controller; the counter runs to completion"
workers "$STORE" w
weir controller --store "$STORE" --spec "$EXAMPLES/counter/spec.yson" --id c1 --admin "$C1" $(tls c1) >c1.log 2>&1 &
C1_PID=$!
await c1.log "admin API at"
# The pipeline is finite (its source says "finite" = %true): the
# controller exits 0 once every event is counted.
wait $C1_PID
echo "controller c1: $(tail -1 c1.log)"

step "5. The output: each key's last count"
# 1000 events over 10 keys: every key counted 100 times, once each.
key_counts "$STORE" counts.txt

# The workers stay for the next pipeline of this store. Here they go.
stop_workers

step "6. A streaming pipeline: a standby controller, lag, caught up"
weir queue create --store "$STREAM_STORE" --partitions 2 events
weir queue create --store "$STREAM_STORE" --partitions 2 counts
workers "$STREAM_STORE" sw
# Two controllers: one leads, the other stands by and takes over within
# --lease-timeout (5s) of the leader's loss.
weir controller --store "$STREAM_STORE" --spec "$EXAMPLES/distributed/streaming.yson" --id c1 --admin "$C1" $(tls c1) >sc1.log 2>&1 &
C1_PID=$!
await sc1.log "admin API at"
weir controller --store "$STREAM_STORE" --spec "$EXAMPLES/distributed/streaming.yson" --id c2 --admin "$C2" $(tls c2) >sc2.log 2>&1 &
C2_PID=$!
await sc2.log "admin API at"
# Any controller's GET /status names the active one ("leader"; the
# standby answers "active": false).
leader() {
	for _ in $(seq 600); do
		for c in "$C1" "$C2"; do
			if [[ $(admin "$c" /status | jq -r .active) == true ]]; then
				echo "$c"
				return 0
			fi
		done
		sleep 0.1
	done
	return 1
}
ACTIVE=$(leader)
echo "active controller: $ACTIVE"
# caught_up: every event written before the previous GET /status is
# counted and nothing is in flight.
caught_up() {
	for _ in $(seq 600); do
		[[ $(admin "$ACTIVE" /status | jq -r .lag.caught_up) == true ]] && return 0
		sleep 0.2
	done
	return 1
}
events 500 | weir queue write --store "$STREAM_STORE" events
admin "$ACTIVE" /status | jq -c .lag
caught_up
admin "$ACTIVE" /status | jq -c .lag
# More input while it runs: it is counted as it comes.
events 500 | weir queue write --store "$STREAM_STORE" events
caught_up
key_counts "$STREAM_STORE" stream-counts.txt
# The pipeline's counters for Prometheus (summed over the workers; a new
# leader goes on from them).
admin "$ACTIVE" /metrics | grep -E '^weir_(inputs_total|controller_active|controller_term)'

step "7. A handover: the active controller stops, the standby adopts its jobs"
# SIGTERM: the active controller resigns, the standby leads at its next
# poll and keeps every running job (adopted: none started again), so the
# pipeline does not stop. Replacing a controller, or upgrading it in
# place, is this step.
if [[ $ACTIVE == "$C1" ]]; then STANDBY_PID=$C2_PID ACTIVE_PID=$C1_PID; else STANDBY_PID=$C1_PID ACTIVE_PID=$C2_PID; fi
kill -TERM $ACTIVE_PID && wait $ACTIVE_PID
ACTIVE=$(leader)
echo "active controller: $ACTIVE"
admin "$ACTIVE" /metrics | grep -E '^weir_jobs_total\{event="(adopted|started)"\}'
events 500 | weir queue write --store "$STREAM_STORE" events
caught_up
key_counts "$STREAM_STORE" stream-counts.txt 150

step "8. A rescale: the Counter from 4 to 8 partitions, while it runs"
# POST /pipeline/rescale: the Counter quiesces (takes no input, delivers
# what it emitted), its jobs and the Reader's stop, the new layout is
# committed and the jobs start on the new key ranges; the events written
# meanwhile wait and are counted after, exactly once.
events 500 | weir queue write --store "$STREAM_STORE" events
curl -sS --fail-with-body --cacert ca.pem -H "Authorization: Bearer $(cat token)" -H "Content-Type: application/json" \
	-d '{"computation": "Counter", "partitions": 8}' "https://$ACTIVE/pipeline/rescale" | jq -c '{recorded, computation}'
rescaled() {
	for _ in $(seq 600); do
		[[ $(admin "$ACTIVE" /status | jq '[.rescales.done[]? | select(.to == 8)] | length') -gt 0 ]] && return 0
		sleep 0.1
	done
	return 1
}
rescaled
admin "$ACTIVE" /status | jq -c '.rescales.done[] | {computation, from, to}'
admin "$ACTIVE" /status | jq '[.pipeline.partitions[] | select(.Partition | startswith("Counter/"))] | length'
caught_up
key_counts "$STREAM_STORE" stream-counts.txt 200

step "9. Stop"
# The active controller (it resigns: a standby left would take over at
# once; here none is), then the workers as in step 5.
kill -TERM $STANDBY_PID && wait $STANDBY_PID
stop_workers
echo "walkthrough done"
