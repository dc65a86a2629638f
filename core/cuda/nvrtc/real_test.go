package nvrtc

import (
	"encoding/binary"
	"os"
	"testing"

	"github.com/lmstream/lmstream/core/cuda/internal/testkernel"
	"github.com/stretchr/testify/require"
)

// openOrSkip opens the machine's NVRTC, skipping the test with the search's
// error when there is none, unless LMSTREAM_REQUIRE_NVRTC=1 (CI installs the
// wheel, so there a missing NVRTC is a failure).
func openOrSkip(t *testing.T) *NVRTC {
	t.Helper()
	n, err := Open("")
	if err != nil {
		if os.Getenv("LMSTREAM_REQUIRE_NVRTC") == "1" {
			t.Fatalf("LMSTREAM_REQUIRE_NVRTC=1: %v", err)
		}
		t.Skipf("%v", err)
	}
	t.Logf("using %s", n.Found())
	return n
}

const emCUDA = 190 // ELF e_machine of a cubin

func TestRealCompile(t *testing.T) {
	n := openOrSkip(t)
	t.Setenv("LMSTREAM_CACHE_DIR", t.TempDir())
	for _, arch := range []string{"sm_80", "sm_90"} {
		t.Run(arch, func(t *testing.T) {
			cubin, err := n.CompileCached([]byte(testkernel.Source), "testkernel.cu", arch, nil)
			require.NoError(t, err)
			require.Equal(t, "\x7fELF", string(cubin[:4]))
			require.Equal(t, byte(2), cubin[4], "64-bit ELF")
			require.Equal(t, uint16(emCUDA), binary.LittleEndian.Uint16(cubin[18:]))
			again, err := n.CompileCached([]byte(testkernel.Source), "testkernel.cu", arch, nil)
			require.NoError(t, err)
			require.Equal(t, cubin, again)
		})
	}

	// A compile error carries NVRTC's log, naming the line.
	_, log, err := n.Compile([]byte("extern \"C\" __global__ void k() { undeclared_thing(); }"), "broken.cu",
		Options("sm_90", nil))
	require.Error(t, err)
	require.Contains(t, log, "undeclared_thing")
	require.Contains(t, err.Error(), "NVRTC_ERROR_COMPILATION")
	require.Contains(t, err.Error(), "broken.cu(1)")
}
