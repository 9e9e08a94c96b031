# leaf-go. CONTRIBUTING.md says when to run which target.
#   make run     the server on the embedded SQLite store
#   make check   the quick loop: vet, staticcheck, go test -short (no services),
#                and the cross-compile (make cross: macOS and Windows)
#   make test    the full loop: every test with the race detector, plus the
#                fast-path packages without it (needs PostgreSQL, MariaDB
#                and ZooKeeper; see README)
#   make lint    gofmt and golangci-lint with .golangci.yml
#   make fuzz    every fuzz target for FUZZTIME each
GO ?= go
BIN := bin

# Linters, pinned and run with `go run pkg@version`: nothing is added to
# go.mod, and Go caches the built tool, so only the first run builds it.
STATICCHECK   := honnef.co/go/tools/cmd/staticcheck@v0.8.2
GOLANGCI_LINT := github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0

# How long `make fuzz` fuzzes each target: make fuzz FUZZTIME=1m.
FUZZTIME ?= 10s

.PHONY: run build release check cross test faults bench pgo lint fuzz clean tidb k8s

# run: build (below), then run leaf-server on the embedded SQLite store.
# ARGS passes flags: make run ARGS='--listen 127.0.0.1:9090'.
run: build
	./$(BIN)/leaf-server $(ARGS)

# build: leaf-server and leafctl in one `go build`, so every dependency is
# compiled once for both. -pgo=off: with cmd/leaf-server/default.pgo Go
# compiles every dependency a second time with the profile, for a few per
# cent of throughput that a first run does not need; `make release` keeps
# it. -buildvcs=auto records the commit (--version, /api/v1/info) in a Git
# checkout even where GOFLAGS says -buildvcs=false.
build:
	@echo "building leaf-server and leafctl into $(BIN)/ (a first build compiles every dependency; later ones take seconds)..."
	$(GO) build -buildvcs=auto -pgo=off -o $(BIN)/ ./cmd/leaf-server ./cmd/leafctl

# release: the binaries users run in production: profile-guided
# (cmd/leaf-server/default.pgo, `make pgo`), trimmed paths. VERSION sets
# the version --version and /api/v1/info report (internal/buildinfo).
VERSION ?=
release:
	$(GO) build -buildvcs=auto -pgo=auto -trimpath \
		$(if $(VERSION),-ldflags "-X github.com/leaf-go/leaf/internal/buildinfo.version=$(VERSION)") \
		-o $(BIN)/ ./cmd/leaf-server ./cmd/leafctl

# check: the quick loop (CONTRIBUTING.md says how long it takes), on a machine
# without PostgreSQL, MariaDB or ZooKeeper. -short skips every test that
# needs a service, a server process or a browser (even with CI=true); test
# results of unchanged packages come from Go's test cache.
check:
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	$(GO) test -short -timeout 5m ./...
	cd internal/testing && $(GO) vet ./...
	cd internal/testing && $(GO) run $(STATICCHECK) ./...
	cd internal/testing && $(GO) test -short -timeout 5m ./...
	$(MAKE) cross

# cross: every package and command of both modules builds for macOS and
# Windows on amd64 and arm64 (go build compiles no tests). Linux-only code
# sits behind build tags with a fallback (snowflake/lease/boot_*.go); the
# process helpers of the tests (internal/dbproctest, internal/galeratest,
# internal/etcdtest) are unix only, internal/k8stest (Pdeathsig) Linux only.
cross:
	@for os in darwin windows; do for arch in amd64 arm64; do \
		echo "GOOS=$$os GOARCH=$$arch go build ./... (root, internal/testing)"; \
		GOOS=$$os GOARCH=$$arch $(GO) build ./... || exit 1; \
		(cd internal/testing && GOOS=$$os GOARCH=$$arch $(GO) build ./...) || exit 1; \
	done; done

# test: the full loop, what CI runs (.ci/run). It runs lint and cross
# first, so the linters and the macOS and Windows builds are enforced
# wherever the tests are. The second run is without the
# race detector: the race build lays memory out differently, and the
# cache-line layout checks of the fast path hold only in the build users run.
# It covers the fast-path packages only (segment, snowflake and api, not the
# worker-ID sources, whose coordinator tests take minutes and have no layout
# checks).
test: lint cross
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 25m ./...
	$(GO) test -count=1 -timeout 10m ./segment/... ./snowflake ./api/...
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
# and MariaDB as `make test` does; about 10 minutes on 2 cores.
bench:
	cd internal/testing && $(GO) test -v -count=1 -timeout 15m -run '^TestHarness$$' ./bench/ -args -harness -out $(CURDIR)/BENCHMARKS.md

# tidb: not part of `make test`. Builds tidb-server from the Go module proxy
# at one pinned version (TIDB_VERSION, TiDB master of 2025-11-26) in a
# scratch module outside this repository, caches the binary in
# ~/.cache/leaf-go/tidb (the first build takes about 15 minutes on 2 idle
# cores and ~2 GB of module cache),
# starts it on unistore on 127.0.0.1:24000 and runs TestTiDB against it in
# pessimistic and optimistic modes (internal/testing/tidb/run.sh).
tidb:
	GO=$(GO) bash internal/testing/tidb/run.sh

# k8s: not part of `make test`, and so not of CI. Builds kube-apiserver
# (K8S_VERSION, Kubernetes v1.37.2) from the Go module proxy in a scratch
# module outside this repository and caches it in
# ~/.cache/leaf-go/kube-apiserver-v1.37.2 (internal/k8stest/build.sh), then runs the tests that
# need it with LEAF_TEST_KUBE_APISERVER set: the test bed itself,
# snowflake/k8sworker, the manifests of deploy/kubernetes applied with
# server-side dry-run, and the Kubernetes worker-ID source's fault tests
# (loopback ports 24400-24499; etcd, openssl and kubectl from the machine).
# Why not in CI: the first build takes about 5 minutes of both cores on an
# idle machine and took 19 minutes (downloads included) on the shared 2-core
# machine of 2026-12-02 (plus about 1 GB of module cache), and CI already
# takes about 26 of its 30 minutes. Without LEAF_TEST_KUBE_APISERVER those
# tests skip, even with CI=true, as TestTiDB does without its DSN. A cached
# binary makes later runs start at once.
k8s:
	@bin=$$(GO=$(GO) bash internal/k8stest/build.sh | tail -1) && test -x "$$bin" && \
	echo "make k8s: $$bin" && \
	LEAF_TEST_KUBE_APISERVER=$$bin $(GO) test -race -count=1 -timeout 20m ./internal/k8stest/ ./snowflake/k8sworker/ && \
	cd internal/testing && LEAF_TEST_KUBE_APISERVER=$$bin $(GO) test -race -count=1 -timeout 20m \
		-run '^(TestManifestsServerDryRun|TestKubernetesWorkerIDs)$$' ./deploy/ ./faults/

# pgo: rewrite cmd/leaf-server/default.pgo, the CPU profile `go build` uses
# for leaf-server (profile-guided optimization), from a server under load on
# the embedded SQLite store. About 1 minute; commit the new file.
pgo:
	bash cmd/leaf-server/pgo.sh

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) run $(GOLANGCI_LINT) run ./...
	cd internal/testing && $(GO) run $(GOLANGCI_LINT) run --config ../../.golangci.yml ./...
	@# every file and name that docs/architecture.md cites must exist
	@out=$$(bash docs/checkrefs.sh 2>&1) || { echo "$$out"; exit 1; }

# fuzz: every fuzz target in the tree, found afresh on each run (the
# directories whose tests declare `func Fuzz…`, then `go test -list` for the
# exact names), each fuzzed for FUZZTIME. Each runs inside its directory, so
# a nested module's targets are fuzzed too. -short keeps the TestMains that
# build leaf-server (internal/servertest) from building it for nothing.
# Go 1.26's fuzzing coordinator can fail a run with a bare "context deadline
# exceeded" when -fuzztime ends while a worker is busy (go.dev/issue/75804,
# fixed in Go 1.27); such a run wrote no failing input and is reported, not
# failed. A run that wrote a failing input, or failed otherwise, stops make.
fuzz:
	@set -e; \
	dirs=$$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u); \
	test -n "$$dirs" || { echo "no fuzz targets found"; exit 1; }; \
	log=$$(mktemp); trap 'rm -f "$$log"' EXIT; \
	for dir in $$dirs; do \
		list=$$(cd $$dir && $(GO) test -short -list '^Fuzz' .); \
		targets=$$(echo "$$list" | grep '^Fuzz'); \
		for target in $$targets; do \
			echo "== $$dir $$target ($(FUZZTIME))"; \
			if (cd $$dir && $(GO) test -short -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) .) >"$$log" 2>&1; then \
				cat "$$log"; \
			else \
				cat "$$log"; \
				if grep -q 'Failing input written to' "$$log" || ! grep -q '^    context deadline exceeded$$' "$$log"; then exit 1; fi; \
				echo "== $$target: ended by the -fuzztime race of go.dev/issue/75804, no failing input; not a failure"; \
			fi; \
		done; \
	done

clean:
	rm -rf $(BIN) data
