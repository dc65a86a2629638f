package kernels

import (
	"bytes"
	"debug/elf"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/cuda/nvrtc"
)

// TestKernelsCompile compiles the kernels with NVRTC for the data-centre
// architectures the backend targets, to cubins holding every entry point.
// No GPU is needed; CI installs NVRTC from PyPI and sets
// LMSTREAM_REQUIRE_NVRTC=1 so that a missing compiler fails here.
func TestKernelsCompile(t *testing.T) {
	n, err := nvrtc.Open("")
	if err != nil {
		if os.Getenv("LMSTREAM_REQUIRE_NVRTC") == "1" {
			t.Fatalf("LMSTREAM_REQUIRE_NVRTC=1: %v", err)
		}
		t.Skipf("%v", err)
	}
	t.Logf("using %s", n.Found())
	for _, arch := range []string{"sm_80", "sm_90"} {
		cubin, log, err := n.Compile(Source, Name, nvrtc.Options(arch, nil))
		require.NoError(t, err, "%s: %s", arch, log)
		f, err := elf.NewFile(bytes.NewReader(cubin))
		require.NoError(t, err)
		syms, err := f.Symbols()
		require.NoError(t, err)
		have := map[string]bool{}
		for _, s := range syms {
			have[s.Name] = true
		}
		for _, e := range Entry {
			require.True(t, have[e], "%s: cubin has no kernel %s", arch, e)
		}
		t.Logf("%s: %d-byte cubin", arch, len(cubin))
	}
}
