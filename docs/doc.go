// Package docs holds the tests that keep README.md and the documents in this
// folder true: transcript_test.go runs every shell session they show
// (`$ curl …`, `$ leafctl …`, each followed by its answer) against a real
// leaf-server process on loopback and compares the answers, and
// configuration.md is generated from leaf-server's flag definitions (go
// generate ./cmd/leaf-server; TestConfigurationDoc there fails when the
// committed file differs).
//
// The package has no code of its own; it exists for its tests.
package docs
