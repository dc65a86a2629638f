//go:build amd64 && !noasm

package quant

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLowBitKernelsInstalled: where the CPU has AVX2, the SIMD kernel set
// runs the low-bit types on their assembly kernels (so TestDots and
// TestBatchInvariance compare those, not the Go code with itself).
func TestLowBitKernelsInstalled(t *testing.T) {
	if !hasAVX2() || os.Getenv(KernelsEnv) == "generic" {
		t.Skip("no AVX2 kernels in this process")
	}
	for _, wt := range lowBitTypes {
		require.NotNil(t, simdKernels.multi[wt], wt)
	}
}
