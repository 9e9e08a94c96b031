#!/usr/bin/env bash
# make tidb: build tidb-server from the Go module proxy at one pinned
# version, start it on its embedded unistore store on loopback, and run
# TestTiDB (internal/testing/faults/tidb_test.go) against it: the store
# conformance suites, three leaf-servers on one database and the SQL lease
# claim, in pessimistic and optimistic transaction modes. Not part of
# `make test`.
#
# The build happens once, in a scratch module outside this repository
# (TIDB_CACHE, default ~/.cache/leaf-go/tidb), so that TiDB's dependencies
# never enter leaf-go's go.mod. Its go.mod requires github.com/pingcap/tidb
# at TIDB_VERSION and copies TiDB's own replace lines (the local
# ./pkg/parser replace becomes the parser module at the same commit). The
# binary is cached there too: the first build takes about 15 minutes on 2
# idle cores (far longer when other work shares them) and needs about 2 GB
# of module cache; later runs start at once.
#
# github.com/pingcap/tidb has no semver tags the proxy lists, so the
# version is a pseudo-version of one commit. The proxy refuses the
# pseudo-version of the v8.5.1 tag's commit (fea86c8e35ad, 2025-01-16; it
# is not on master's history) and serves master's commits: the pin is TiDB
# master of 26 November 2025.
set -euo pipefail

# TiDB master, commit e4e814fdc0af (2025-11-26 15:47:44 UTC); its parser
# module is served at the same time and commit.
TIDB_RELEASE=${TIDB_RELEASE:-master-20251126}
TIDB_VERSION=${TIDB_VERSION:-v1.1.0-beta.0.20251126154744-e4e814fdc0af}
TIDB_CACHE=${TIDB_CACHE:-$HOME/.cache/leaf-go/tidb}
# Loopback ports of the TiDB server: MySQL protocol and status (HTTP).
TIDB_PORT=${TIDB_PORT:-24000}
TIDB_STATUS_PORT=${TIDB_STATUS_PORT:-24001}
GO=${GO:-go}

repo=$(cd "$(dirname "$0")/../../.." && pwd)
bin=$TIDB_CACHE/bin/tidb-server-$TIDB_RELEASE

build() {
	local src=$TIDB_CACHE/src-$TIDB_RELEASE
	mkdir -p "$src" "$TIDB_CACHE/bin"
	cd "$src"
	echo "make tidb: fetching github.com/pingcap/tidb@$TIDB_VERSION ($TIDB_RELEASE) from the Go module proxy"
	local info
	if ! info=$("$GO" mod download -json "github.com/pingcap/tidb@$TIDB_VERSION" 2>&1); then
		echo "make tidb: the Go module proxy did not serve github.com/pingcap/tidb@$TIDB_VERSION:" >&2
		echo "$info" | grep '"Error"' >&2 || echo "$info" >&2
		echo "make tidb: nothing built (see RELIABILITY.md, TiDB)" >&2
		exit 1
	fi
	local tidbmod
	tidbmod=$(echo "$info" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
	test -f "$tidbmod" || { echo "make tidb: no go.mod in: $info" >&2; exit 1; }
	# The pseudo-version's time and commit name the parser module's version.
	local ts=${TIDB_VERSION%-*}
	ts=${ts##*.}
	local commit=${TIDB_VERSION##*-}
	local goline
	goline=$(grep -m1 '^go ' "$tidbmod")
	{
		echo "module leafgo.local/tidbbuild"
		echo
		echo "$goline"
		echo
		echo "require github.com/pingcap/tidb $TIDB_VERSION"
		echo
		echo "// TiDB's replace lines at $TIDB_RELEASE; ./pkg/parser is its parser module at the same commit."
		echo "replace ("
		# Both forms: a replace ( … ) block and single replace lines.
		awk '
			/^replace \($/ { inblock = 1; next }
			inblock && /^\)$/ { inblock = 0; next }
			inblock && /=>/ { print; next }
			/^replace [^(]/ { sub(/^replace /, "\t"); print }
		' "$tidbmod" | grep -v '^[[:space:]]*//' |
			sed "s#=> \./pkg/parser\$#=> github.com/pingcap/tidb/pkg/parser v0.0.0-$ts-$commit#"
		echo ")"
	} >go.mod
	if grep -q '=> \.' go.mod; then
		echo "make tidb: TiDB's go.mod has a local replace this script does not map:" >&2
		grep '=> \.' go.mod >&2
		exit 1
	fi
	echo "make tidb: scratch module $src/go.mod:"
	cat go.mod
	nice -n 15 "$GO" mod download
	GOFLAGS=-mod=mod nice -n 15 "$GO" get "github.com/pingcap/tidb/cmd/tidb-server@$TIDB_VERSION"
	local vi=github.com/pingcap/tidb/pkg/util/versioninfo
	echo "make tidb: building tidb-server (about 15 minutes on 2 idle cores the first time)"
	GOFLAGS=-mod=mod nice -n 15 "$GO" build -trimpath \
		-ldflags "-X $vi.TiDBReleaseVersion=$TIDB_RELEASE -X $vi.TiDBGitHash=$commit -X $vi.TiDBEdition=Community" \
		-o "$bin.tmp" github.com/pingcap/tidb/cmd/tidb-server
	mv "$bin.tmp" "$bin"
}

if [ ! -x "$bin" ]; then
	(build)
fi
echo "make tidb: $("$bin" -V | head -1)"

run=$(mktemp -d)
pid=
cleanup() {
	if [ -n "$pid" ]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$run"
}
trap cleanup EXIT
cd "$run"
"$bin" -store unistore -path "" -host 127.0.0.1 -P "$TIDB_PORT" -status "$TIDB_STATUS_PORT" \
	-log-file "$run/tidb.log" >"$run/stdout.log" 2>&1 &
pid=$!
for _ in $(seq 1 120); do
	if curl -fsS "http://127.0.0.1:$TIDB_STATUS_PORT/status" >/dev/null 2>&1; then
		break
	fi
	if ! kill -0 "$pid" 2>/dev/null; then
		echo "make tidb: tidb-server exited:" >&2
		tail -20 "$run/stdout.log" "$run/tidb.log" >&2 || true
		exit 1
	fi
	sleep 1
done
curl -fsS "http://127.0.0.1:$TIDB_STATUS_PORT/status" || { echo "make tidb: tidb-server did not answer in 120 s" >&2; exit 1; }
echo

report=${LEAF_FAULTS_REPORT:-$TIDB_CACHE/report-$TIDB_RELEASE.md}
cd "$repo/internal/testing"
LEAF_TEST_TIDB_DSN="mysql://root@tcp(127.0.0.1:$TIDB_PORT)/test" LEAF_FAULTS_REPORT=$report \
	"$GO" test -count=1 -v -timeout 30m -run '^TestTiDB$' ./faults/
echo "make tidb: report in $report"
cat "$report"
