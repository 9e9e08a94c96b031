// Package buildinfo tells which build of leaf-go is running: the version,
// the commit and the Go toolchain, read from what `go build` records in
// every binary (runtime/debug.ReadBuildInfo: the module version and, in a
// Git checkout, the vcs.revision, vcs.time and vcs.modified settings). The
// version can be set at link time for a release:
//
//	go build -ldflags "-X github.com/leaf-go/leaf/internal/buildinfo.version=v1.2.3" ./cmd/...
//
// leaf-server and leafctl print it for --version; leaf-server logs it at
// start and serves it on GET /api/v1/info and the dashboard.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is set with -ldflags -X at link time; "" means "take the module
// version go build recorded".
var version string

// Info is one binary's build.
type Info struct {
	// Version is the link-time version, else the main module's version as
	// go build recorded it ("(devel)" for a build from a checkout).
	Version string `json:"version"`
	// Commit is the Git commit the binary was built from (vcs.revision, 40
	// hex digits), "" when built outside a Git checkout or with
	// -buildvcs=false.
	Commit string `json:"commit"`
	// CommitTime is the commit's time in RFC 3339 (vcs.time), "" when
	// unknown.
	CommitTime string `json:"commitTime"`
	// Modified is true when the checkout had uncommitted changes
	// (vcs.modified).
	Modified bool `json:"modified"`
	// GoVersion is the Go toolchain that built the binary, e.g. "go1.26.8".
	GoVersion string `json:"goVersion"`
	// Platform is GOOS/GOARCH of the binary, e.g. "linux/amd64".
	Platform string `json:"platform"`
}

// Read returns the running binary's Info. It never fails: what the binary
// does not record stays empty (Version "(unknown)" when there is no build
// information at all, as in some test binaries).
func Read() Info {
	in := Info{Version: version, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		if in.Version == "" {
			in.Version = "(unknown)"
		}
		return in
	}
	if in.Version == "" {
		in.Version = bi.Main.Version
	}
	if in.Version == "" {
		in.Version = "(devel)"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Commit = s.Value
		case "vcs.time":
			in.CommitTime = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	return in
}

// String is the one line --version prints: "<program> <version> (commit
// <12 hex digits>[, modified], <go version>, <platform>)"; the commit part
// is left out when unknown.
func (in Info) String() string {
	commit := ""
	if in.Commit != "" {
		c := in.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		commit = "commit " + c
		if in.Modified {
			commit += ", modified"
		}
		commit += ", "
	}
	return fmt.Sprintf("%s (%s%s, %s)", in.Version, commit, in.GoVersion, in.Platform)
}
