// Package docs holds the tests that keep README.md and the documents in this
// folder true:
//
//   - transcript_test.go runs every shell session they show (`$ curl …`,
//     `$ leafctl …`, `$ leaf-server …`, each followed by its answer) against
//     a real leaf-server process on loopback and compares the answers;
//   - compatibility_test.go checks every row of compatibility.md's table of
//     wire differences against running servers;
//   - facts_test.go checks the numbers the documents state (timeouts, TTLs,
//     bounds, flag defaults) against the code's constants;
//   - citations_test.go checks that every test, path, Go name and flag they
//     cite exists, and that every Built claim of contract.md cites one;
//   - architecture_test.go checks architecture.md's import table against go
//     list;
//   - links_test.go checks every relative link and #anchor.
//
// configuration.md and leafctl.md are generated from the flag and command
// definitions (go generate ./cmd/leaf-server ./cmd/leafctl; TestConfigurationDoc
// and TestReferenceDoc there fail when a committed file differs).
//
// The package has no code of its own; it exists for its tests.
package docs
