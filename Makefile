# leaf-go. `make run` starts the server on the embedded SQLite store;
# `make test` runs every test with the race detector (needs PostgreSQL,
# MariaDB and ZooKeeper for the store tests; see README).
GO ?= go
BIN := bin

.PHONY: run build test faults bench pgo lint fuzz clean

run:
	$(GO) run ./cmd/leaf-server

build:
	$(GO) build -o $(BIN)/leaf-server ./cmd/leaf-server

test:
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 25m ./...
	cd internal/testing && $(GO) vet ./...
	cd internal/testing && $(GO) test -race -count=1 -timeout 25m ./...

# The fault campaign (RELIABILITY.md): real leaf-server processes against
# PostgreSQL, MariaDB and ZooKeeper, kill -9, a TCP fault proxy; about
# 2.5 minutes on 2 cores. `make test` runs it too.
faults:
	cd internal/testing && $(GO) test -race -count=1 -timeout 15m ./faults/

# bench: the benchmark harness (internal/testing/bench/doc.go): every figure
# next to its baseline from the same run, printed and written into
# BENCHMARKS.md between the harness markers. Loopback only, needs PostgreSQL
# and MariaDB as `make test` does; about 5 minutes on 2 cores.
bench:
	cd internal/testing && $(GO) test -v -count=1 -timeout 15m -run '^TestHarness$$' ./bench/ -args -harness -out $(CURDIR)/BENCHMARKS.md

# pgo: rewrite cmd/leaf-server/default.pgo, the CPU profile `go build` uses
# for leaf-server (profile-guided optimization), from a server under load on
# the embedded SQLite store. About 1 minute; commit the new file.
pgo:
	bash cmd/leaf-server/pgo.sh

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet ./...

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParseKey -fuzztime 30s ./api/
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 30s ./store/dsn/

clean:
	rm -rf $(BIN) data
