package model

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/quant"
)

// TestMXFP4NaNExponentIsRefused: an MXFP4 block whose shared exponent is
// E8M0's NaN (0xFF) has no value; GGML would read it as 2^127. The model is
// refused at load, naming the tensor.
func TestMXFP4NaNExponentIsRefused(t *testing.T) {
	f := tinyGGUF(t, defaultTiny(quant.MXFP4), nil)
	_, err := Load(f, 1)
	require.NoError(t, err)

	f = tinyGGUF(t, defaultTiny(quant.MXFP4), nil)
	tn, ok := f.Tensor("blk.1.ffn_down.weight")
	require.True(t, ok)
	require.Equal(t, quant.MXFP4, tn.Type)
	tn.Data[3*17] = 0xff // the fourth block's exponent
	_, err = Load(f, 1)
	require.ErrorContains(t, err, "tensor blk.1.ffn_down.weight: MXFP4 block 3 has the NaN scale exponent 0xFF")
}
