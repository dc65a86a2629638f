package model

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/quant"
)

// allocated returns the bytes fn allocates on the heap (all goroutines;
// the tests here run alone). It measures work, not time, so it does not
// flake on a loaded machine.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestHugeBlockCountFailsAtOnce is issue 10's row 3: block_count values of
// 2^31, 2^32-1, a uint64 2^62 and 1,048,576 in a file with two layers. The
// loader used to append layers past the first missing tensor until the
// process died of memory (1,048,576 took 5 s and ~1 GB to fail). Now the
// count is checked against the tensors present before anything is sized
// by it: a clear error, and the failing load allocates next to nothing.
func TestHugeBlockCountFailsAtOnce(t *testing.T) {
	for _, bc := range []any{uint32(1 << 31), uint32(1<<32 - 1), uint64(1 << 62), uint32(1 << 20), int64(1 << 40)} {
		spec := defaultTiny(quant.Q8_0)
		spec.kv = map[string]any{"llama.block_count": bc}
		f := tinyGGUF(t, spec, nil)
		var err error
		n := allocated(func() { _, err = Load(f, 1) })
		require.ErrorContains(t, err, "llama.block_count is", "%T %v", bc, bc)
		require.ErrorContains(t, err, "the file holds 20 tensors, enough for at most 3 layers")
		require.Less(t, n, uint64(1<<20), "a failing load of block_count %v allocated %d bytes", bc, n)
	}
	spec := defaultTiny(quant.Q8_0)
	spec.kv = map[string]any{"llama.block_count": int32(-5)}
	_, err := Load(tinyGGUF(t, spec, nil), 1)
	require.ErrorContains(t, err, "int32 -5 is out of the range [1,")
}

// TestLoadStopsAtFirstMissingTensor: a count the tensors could hold but
// the file does not (layer 2 of 2) fails on the first missing tensor, and
// nothing after it is looked for.
func TestLoadStopsAtFirstMissingTensor(t *testing.T) {
	spec := defaultTiny(quant.Q8_0)
	spec.layers = 3
	f := tinyGGUF(t, spec, nil)
	// Rename one tensor of layer 1: as many tensors as 3 layers need, but
	// not the ones they need.
	var w bytes.Buffer
	_, err := rewrite(t, f, func(name string) string {
		if name == "blk.1.attn_q.weight" {
			return "blk.1.attn_q.weight.renamed"
		}
		return name
	}).WriteTo(&w)
	require.NoError(t, err)
	f, err = gguf.Parse(w.Bytes())
	require.NoError(t, err)
	_, err = Load(f, 1)
	require.EqualError(t, err, "model: tensor blk.1.attn_q.weight is missing")
}

// rewrite copies f into a Writer, naming each tensor rename(name).
func rewrite(t *testing.T, f *gguf.File, rename func(string) string) *gguf.Writer {
	t.Helper()
	w := gguf.NewWriter()
	for _, kv := range f.KV {
		require.NoError(t, w.AddKV(kv.Key, kv.Value))
	}
	for _, tn := range f.Tensors {
		require.NoError(t, w.AddTensor(rename(tn.Name), tn.Type, tn.Dims, tn.Data))
	}
	return w
}

// TestConfigIsCheckedBeforeSizing: each dimension the metadata gives is
// positive, its products fit, and it agrees with the tensors, before
// anything is allocated by it.
func TestConfigIsCheckedBeforeSizing(t *testing.T) {
	for _, tc := range []struct {
		key  string
		val  any
		want string
	}{
		{"llama.embedding_length", uint32(512), "embedding_length is 512 but token_embd.weight rows have 256 elements"},
		{"llama.embedding_length", uint64(1 << 63), "uint64 9223372036854775808 is out of the range"},
		{"llama.attention.head_count", uint32(0), "uint32 0 is out of the range [1,"},
		{"llama.attention.head_count", uint32(3), "embedding_length 256 is not a multiple of head_count 3"},
		{"llama.attention.head_count_kv", uint32(8), `"llama.attention.head_count_kv": uint32 8 is out of the range [1, 4]`},
		{"llama.attention.key_length", uint64(1 << 61), "head_count 4 × head dimension 2305843009213693952 is too large"},
		{"llama.attention.key_length", uint32(1 << 30), "head_count 4 × head dimension 1073741824 is too large"},
		{"llama.attention.key_length", uint32(128), "attn_q.weight has dims [256 256], the config wants [256 512]"},
		{"llama.feed_forward_length", uint64(1 << 40), "ffn_gate.weight has dims [256 512], the config wants [256 1099511627776]"},
		{"llama.context_length", uint64(1 << 40), `"llama.context_length": uint64 1099511627776 is out of the range [1, 1073741824]`},
		{"llama.rope.freq_base", float64(1e300), "float64 1e+300 does not fit in a float32"},
		{"llama.attention.layer_norm_rms_epsilon", float32(mathInf()), "layer_norm_rms_epsilon is +Inf, want a positive finite number"},
		{"llama.attention.layer_norm_rms_epsilon", "tiny", "is a string, want a float"},
		{"llama.block_count", float32(2), "is a float32, want an integer"},
	} {
		spec := defaultTiny(quant.Q8_0)
		// A head dimension of its own comes with its rotary dimension.
		spec.kv = map[string]any{tc.key: tc.val, "llama.rope.dimension_count": nil}
		f := tinyGGUF(t, spec, nil)
		var err error
		n := allocated(func() { _, err = Load(f, 1) })
		require.ErrorContains(t, err, tc.want, "%s = %v", tc.key, tc.val)
		require.Less(t, n, uint64(1<<20), "%s = %v", tc.key, tc.val)
	}
}

// TestRealModelHugeBlockCount patches the default model's block_count the
// way the issue did (the uint32 value after the key) and loads it.
func TestRealModelHugeBlockCount(t *testing.T) {
	path, _ := filepath.Abs(defaultModelPath)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("default model not found at %s (run `make model`): %v", path, err)
	}
	key := []byte("llama.block_count")
	at := bytes.Index(data, key)
	require.Positive(t, at)
	require.EqualValues(t, gguf.TypeUint32, binary.LittleEndian.Uint32(data[at+len(key):]))
	val := at + len(key) + 4
	for _, bc := range []uint32{1 << 31, 1<<32 - 1, 1 << 20} {
		binary.LittleEndian.PutUint32(data[val:], bc)
		f, err := gguf.Parse(data)
		require.NoError(t, err)
		n := allocated(func() { _, err = Load(f, 1) })
		require.ErrorContains(t, err, "the file holds 272 tensors, enough for at most 45 layers")
		require.Less(t, n, uint64(1<<20))
	}
}

func mathInf() float64 { return math.Inf(1) }

// tinyFile writes the tiny model of spec to a file and maps it.
func tinyFile(t *testing.T, spec tinySpec) (string, *gguf.File) {
	t.Helper()
	var buf bytes.Buffer
	_, err := rewrite(t, tinyGGUF(t, spec, nil), func(s string) string { return s }).WriteTo(&buf)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	f, err := gguf.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return path, f
}

// TestModelOutlivesItsMapping is issue 10's row 8 at the model: after
// Load the forward pass reads none of the file's mapping, so unmapping it
// (as a truncated file takes its pages away) changes nothing. Before, the
// weights were read from the mapping on every pass, here a SIGSEGV.
func TestModelOutlivesItsMapping(t *testing.T) {
	for _, wt := range []quant.Type{quant.Q4_1, quant.Q8_0, quant.Q4_K, quant.F16} {
		for _, untied := range []bool{false, true} {
			spec := defaultTiny(wt)
			spec.untied = untied
			_, f := tinyFile(t, spec)
			m, err := Load(f, 2)
			require.NoError(t, err)
			want, _ := tinyModel(t, spec, 2)
			prompt := []int32{1, 5, 9, 2}
			wantRows := run(t, want, new(Batch).chain(want.NewCache(16), prompt, true))

			require.NoError(t, f.Close())
			got := run(t, m, new(Batch).chain(m.NewCache(16), prompt, true))
			require.Equal(t, wantRows, got, "%s untied=%v", wt, untied)
		}
	}
}

// TestLoadOfAFileTruncatedMeanwhile: a file cut short between Open and
// Load (pages of tensor data gone) is an error from Load, not a SIGBUS;
// one that changed without losing pages is caught by its size and mtime.
func TestLoadOfAFileTruncatedMeanwhile(t *testing.T) {
	spec := defaultTiny(quant.Q8_0)
	path, f := tinyFile(t, spec)
	require.NoError(t, os.Truncate(path, int64(f.DataOffset)))
	_, err := Load(f, 1)
	var fault *gguf.FaultError
	require.ErrorAs(t, err, &fault)
	require.ErrorContains(t, err, "model: loading the weights: gguf: "+path+": reading byte")
	require.ErrorContains(t, err, "truncated")

	path, f = tinyFile(t, spec)
	fd, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = fd.Write(make([]byte, 64))
	require.NoError(t, err)
	require.NoError(t, fd.Close())
	_, err = Load(f, 1)
	require.ErrorContains(t, err, "model: gguf: "+path+" changed while in use")
}
