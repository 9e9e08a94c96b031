#!/usr/bin/env bash
# build.sh: build kube-apiserver from the Go module proxy at one pinned
# version, in a scratch module outside this repository, and cache the
# binary (K8S_CACHE, default ~/.cache/leaf-go/kube-apiserver-$K8S_VERSION).
# Prints the binary's path on its last line. `make k8s` runs it, then the
# tests that need the binary (internal/k8stest's doc comment lists them).
#
# Kubernetes' go.mod replaces each of its staging modules with a local
# directory (./staging/src/k8s.io/X); a module download has no such
# directories, so the scratch module maps each to the published module
# k8s.io/X at the matching v0.Y.Z (Kubernetes v1.Y.Z publishes its staging
# modules as v0.Y.Z). Kubernetes' dependencies never enter leaf-go's go.mod.
# The first build takes about 5 minutes on 2 cores (with `nice`, longer on
# a busy machine); later runs print the cached path at once.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-v1.37.2}
K8S_CACHE=${K8S_CACHE:-$HOME/.cache/leaf-go/kube-apiserver-$K8S_VERSION}
GO=${GO:-go}

staging=v0.${K8S_VERSION#v1.}
bin=$K8S_CACHE/kube-apiserver

if [ -x "$bin" ]; then
	echo "$bin"
	exit 0
fi

src=$K8S_CACHE/src
mkdir -p "$src"
cd "$src"
echo "k8s: fetching k8s.io/kubernetes@$K8S_VERSION from the Go module proxy" >&2
if ! info=$("$GO" mod download -json "k8s.io/kubernetes@$K8S_VERSION" 2>&1); then
	echo "k8s: the Go module proxy did not serve k8s.io/kubernetes@$K8S_VERSION:" >&2
	echo "$info" >&2
	exit 1
fi
kmod=$(echo "$info" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
test -f "$kmod" || { echo "k8s: no go.mod in: $info" >&2; exit 1; }
{
	echo "module leafgo.local/k8sbuild"
	echo
	grep -m1 '^go ' "$kmod"
	grep '^godebug ' "$kmod" || true
	echo
	echo "require k8s.io/kubernetes $K8S_VERSION"
	echo
	echo "// Kubernetes' replace lines at $K8S_VERSION, each ./staging/src/k8s.io/X mapped to k8s.io/X $staging."
	echo "replace ("
	awk '
		/^replace \($/ { inblock = 1; next }
		inblock && /^\)$/ { inblock = 0; next }
		inblock && /=>/ { print; next }
		/^replace [^(]/ { sub(/^replace /, "\t"); print }
	' "$kmod" | grep -v '^[[:space:]]*//' |
		sed -E "s#=> \./staging/src/(k8s\.io/[^ ]+)\$#=> \1 $staging#"
	echo ")"
} >go.mod
if grep -q '=> \.' go.mod; then
	echo "k8s: Kubernetes' go.mod has a local replace this script does not map:" >&2
	grep '=> \.' go.mod >&2
	exit 1
fi
echo "k8s: building kube-apiserver $K8S_VERSION in $src (about 5 minutes on 2 cores the first time)" >&2
GOFLAGS=-mod=mod nice -n 15 "$GO" get "k8s.io/kubernetes/cmd/kube-apiserver@$K8S_VERSION" >&2
GOFLAGS=-mod=mod nice -n 15 "$GO" build -trimpath -o "$bin.tmp" k8s.io/kubernetes/cmd/kube-apiserver >&2
mv "$bin.tmp" "$bin"
echo "$bin"
