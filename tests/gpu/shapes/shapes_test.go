package shapes

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/model"
	"github.com/lmstream/lmstream/core/quant"
	"github.com/lmstream/lmstream/internal/testmodel"
)

const defaultModel = "../../../models/SmolLM2-135M-Instruct.Q4_1.gguf"

// A skeleton without the vocabulary, filled with the vocabulary of
// another file, is the model's metadata and tensor list exactly, its
// size to the byte, and a model the forward pass runs with finite logits.
func TestSkeletonFillRoundTrip(t *testing.T) {
	testmodel.Need(t, defaultModel)
	dir := t.TempDir()
	orig, err := gguf.Open(defaultModel)
	require.NoError(t, err)
	defer orig.Close()
	skelPath, outPath := filepath.Join(dir, "m.skel.gguf"), filepath.Join(dir, "m.gguf")
	require.NoError(t, Skeleton(orig, skelPath, false))
	skel, err := gguf.Open(skelPath)
	require.NoError(t, err)
	defer skel.Close()
	for _, kv := range skel.KV {
		require.False(t, strings.HasPrefix(kv.Key, "tokenizer."), kv.Key)
	}
	st, err := os.Stat(skelPath)
	require.NoError(t, err)
	require.Less(t, st.Size(), int64(64<<10), "a skeleton is kilobytes")

	require.NoError(t, Fill(skel, orig, 7, outPath))
	got, err := gguf.Open(outPath)
	require.NoError(t, err)
	defer got.Close()
	require.Len(t, got.KV, len(orig.KV))
	for _, kv := range orig.KV {
		v, ok := got.Lookup(kv.Key)
		require.True(t, ok, kv.Key)
		require.Equal(t, kv.Value.String(), v.String(), kv.Key)
	}
	require.Len(t, got.Tensors, len(orig.Tensors))
	for i, w := range orig.Tensors {
		g := got.Tensors[i]
		require.Equal(t, w.Name, g.Name)
		require.Equal(t, w.Type, g.Type, w.Name)
		require.Equal(t, w.Dims, g.Dims, w.Name)
	}
	a, err := os.Stat(defaultModel)
	require.NoError(t, err)
	b, err := os.Stat(outPath)
	require.NoError(t, err)
	require.Equal(t, a.Size(), b.Size())

	m, err := model.Load(got, 1)
	require.NoError(t, err)
	defer m.Close()
	c := m.NewCache(8)
	logits := make([]float32, m.Config().Vocab)
	require.NoError(t, m.Forward(&model.Batch{Tokens: []int32{1}, Cache: []model.Cache{c}, Pos: []int{0}, Parent: []int{-1}, Logits: []bool{true}}, logits))
	spread := false
	for _, x := range logits {
		require.False(t, math.IsNaN(float64(x)) || math.IsInf(float64(x), 0))
		spread = spread || x != logits[0]
	}
	require.True(t, spread, "random weights give varied logits")
}

// Fill takes its skeleton from anywhere: malformed tensor lists are
// refused by name before anything is allocated or written.
func TestFillRefusesBadSkeletons(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		list any
		want string
	}{
		{"no list", nil, "not a skeleton"},
		{"short entry", []string{"a 0"}, "want a name, a type and 1 to"},
		{"unknown type", []string{"a 99 32"}, "unknown tensor type 99"},
		{"unsupported type", []string{"a 19 256"}, "IQ1_S"},
		{"zero dimension", []string{"a 0 0"}, `dimension "0"`},
		{"negative dimension", []string{"a 0 -4"}, `dimension "-4"`},
		{"not a number", []string{"a 0 x"}, `dimension "x"`},
		{"product too large", []string{"a 0 1048576 1048576 1048576"}, "too large"},
		{"sum too large", []string{"a 0 1048576 524288", "b 0 1048576 524288", "c 0 1048576 524288"}, "more than"},
		{"too much at once", []string{"a 0 1048576 4096"}, "more than 8589934592 bytes at once"},
		{"partial block", []string{"a 2 33"}, "not a whole number of 32-element blocks"},
	} {
		w := gguf.NewWriter()
		require.NoError(t, w.AddKV("general.architecture", "llama"))
		if c.list != nil {
			require.NoError(t, w.AddKV(TensorsKey, c.list))
		}
		path := filepath.Join(dir, "s.gguf")
		require.NoError(t, w.WriteFile(path))
		skel, err := gguf.Open(path)
		require.NoError(t, err)
		out := filepath.Join(dir, "out.gguf")
		err = Fill(skel, nil, 1, out)
		skel.Close()
		require.ErrorContains(t, err, c.want, c.name)
		_, err = os.Stat(out)
		require.True(t, os.IsNotExist(err), "%s: nothing written", c.name)
	}
}

// Every weight type the engine reads fills: quantized from random values
// without a NaN or an infinity in the scales.
func TestRandomEveryType(t *testing.T) {
	for _, wt := range []quant.Type{quant.F32, quant.F16, quant.BF16, quant.Q4_0, quant.Q4_1, quant.Q5_0, quant.Q8_0, quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.IQ4_NL, quant.IQ4_XS} {
		data, err := random(randFor(1), "matrix", tensor{name: "w", typ: wt, dims: []int{256, 100}})
		require.NoError(t, err, wt)
		rb, _ := wt.RowBytes(256)
		require.Len(t, data, 100*rb)
		x := make([]float32, 256)
		for r := range 100 {
			require.NoError(t, quant.Dequantize(wt, data[r*rb:(r+1)*rb], x), wt)
			for _, v := range x {
				require.False(t, math.IsNaN(float64(v)) || math.IsInf(float64(v), 0), "%s row %d", wt, r)
			}
		}
	}
}
