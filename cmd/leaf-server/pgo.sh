#!/usr/bin/env bash
# pgo.sh (make pgo) rewrites cmd/leaf-server/default.pgo, the CPU profile
# that `go build` applies to leaf-server by default (-pgo=auto, Go >= 1.21):
# hot calls get inlined across packages (segment.Generator.Get, the chi
# router, net/http). The profile is taken from a leaf-server built without
# PGO, on the embedded SQLite store (no external service), while leafctl
# bench loads it the way production does: Leaf's single-ID segment route at
# 64 clients, the snowflake route and the batch API. See BENCHMARKS.md for
# what it changes.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'kill "${pid:-}" 2>/dev/null || true; rm -rf "$tmp"' EXIT
cd "$root"
go build -pgo=off -o "$tmp/leaf-server" ./cmd/leaf-server
go build -o "$tmp/leafctl" ./cmd/leafctl
dsn="sqlite:$tmp/data/leaf.db"
mkdir -p "$tmp/data"
"$tmp/leafctl" migrate up --dsn "$dsn" >/dev/null
"$tmp/leafctl" tag create bench --step 1000000 --dsn "$dsn" >/dev/null
"$tmp/leaf-server" --listen 127.0.0.1:0 --pprof-listen 127.0.0.1:0 --data-dir "$tmp/data" \
	--log-format json 2>"$tmp/log" &
pid=$!
addr() { # the addr of the log line with msg $1
	sed -n "s/.*\"msg\":\"$1\",\"addr\":\"\([^\"]*\)\".*/\1/p" "$tmp/log" | head -1
}
for _ in $(seq 100); do
	[ -n "$(addr listening)" ] && break
	sleep 0.1
done
server=http://$(addr listening) pprof=http://$(addr 'pprof listening')
[ "$server" != http:// ] || { cat "$tmp/log"; exit 1; }
"$tmp/leafctl" bench --server "$server" --tag bench --concurrency 16 --duration 2s >/dev/null # warm up
curl -fsS -o "$tmp/cpu.pprof" "$pprof/debug/pprof/profile?seconds=30" &
curlpid=$!
"$tmp/leafctl" bench --server "$server" --tag bench --concurrency 64 --duration 18s | grep -E '^(requests|rate)'
"$tmp/leafctl" bench --server "$server" --mode snowflake --concurrency 16 --duration 6s | grep -E '^(requests|rate)'
"$tmp/leafctl" bench --server "$server" --tag bench --batch 1000 --concurrency 4 --duration 5s | grep -E '^(requests|rate)'
wait "$curlpid"
go tool pprof -top -nodecount 15 "$tmp/cpu.pprof" 2>/dev/null | sed -n '1,22p'
cp "$tmp/cpu.pprof" cmd/leaf-server/default.pgo
echo "wrote cmd/leaf-server/default.pgo ($(wc -c <cmd/leaf-server/default.pgo) bytes)"
