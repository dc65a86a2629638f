// Package testmodel is how tests meet the real models under models/ (make
// model, make test-models): a test whose model file is absent skips, so a
// checkout without the downloads still tests everything else, unless
// LMSTREAM_REQUIRE_MODELS=1 (CI, which fetches them first) makes the
// absence a failure instead of a silent skip.
package testmodel

import (
	"os"
	"testing"
)

// Need skips tb, or fails it under LMSTREAM_REQUIRE_MODELS=1, when the
// model file at path is absent.
func Need(tb testing.TB, path string) {
	tb.Helper()
	if _, err := os.Stat(path); err != nil {
		if Required() {
			tb.Fatalf("model absent and LMSTREAM_REQUIRE_MODELS=1: %v", err)
		}
		tb.Skipf("model absent (run `make model`, or `make test-models` for every test model): %v", err)
	}
}

// Required reports whether LMSTREAM_REQUIRE_MODELS=1 asks every model to
// be present.
func Required() bool { return os.Getenv("LMSTREAM_REQUIRE_MODELS") == "1" }
