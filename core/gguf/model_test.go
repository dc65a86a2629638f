package gguf

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/quant"
)

func TestRealModel(t *testing.T) {
	f, err := Open(modelPath(t))
	require.NoError(t, err)
	defer func() { require.NoError(t, f.Close()) }()

	require.EqualValues(t, 3, f.Version)
	require.Equal(t, 32, f.Alignment)
	arch, err := f.String("general.architecture")
	require.NoError(t, err)
	require.Equal(t, "llama", arch)
	layers, err := f.Int("llama.block_count")
	require.NoError(t, err)
	require.Equal(t, 30, layers)
	embd, err := f.Uint32("llama.embedding_length")
	require.NoError(t, err)
	require.EqualValues(t, 576, embd)
	eps, err := f.Float32("llama.attention.layer_norm_rms_epsilon")
	require.NoError(t, err)
	require.InDelta(t, 1e-5, eps, 1e-9)

	tokens, err := f.Strings("tokenizer.ggml.tokens")
	require.NoError(t, err)
	require.Len(t, tokens, 49152)
	require.Equal(t, "<|endoftext|>", tokens[0])
	types, err := f.Int32s("tokenizer.ggml.token_type")
	require.NoError(t, err)
	require.Len(t, types, 49152)
	merges, err := f.Strings("tokenizer.ggml.merges")
	require.NoError(t, err)
	require.NotEmpty(t, merges)
	require.Equal(t, "Ġ t", merges[0])

	emb, ok := f.Tensor("token_embd.weight")
	require.True(t, ok)
	require.Equal(t, quant.Q8_0, emb.Type)
	require.Equal(t, []int{576, 49152}, emb.Dims)
	require.Len(t, emb.Data, 576/32*34*49152)
	q, ok := f.Tensor("blk.0.attn_q.weight")
	require.True(t, ok)
	require.Equal(t, quant.Q4_1, q.Type)
	require.Equal(t, []int{576, 576}, q.Dims)

	counts := map[quant.Type]int{}
	bytesOf := map[quant.Type]int{}
	for i := range f.Tensors {
		tt := &f.Tensors[i]
		counts[tt.Type]++
		bytesOf[tt.Type] += len(tt.Data)
		if strings.HasSuffix(tt.Name, "_norm.weight") {
			require.Equalf(t, quant.F32, tt.Type, "%s", tt.Name)
		}
		require.Equal(t, tt.RowBytes()*tt.Rows(), len(tt.Data))
	}
	// Every layer has its 9 tensors.
	for l := range layers {
		for _, n := range []string{"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"} {
			_, ok := f.Tensor(fmt.Sprintf("blk.%d.%s.weight", l, n))
			require.Truef(t, ok, "blk.%d.%s.weight", l, n)
		}
	}
	typesSeen := make([]quant.Type, 0, len(counts))
	for typ := range counts {
		typesSeen = append(typesSeen, typ)
	}
	slices.Sort(typesSeen)
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d tensors, %d metadata pairs, data section at byte %d:", len(f.Tensors), len(f.KV), f.DataOffset)
	for _, typ := range typesSeen {
		fmt.Fprintf(&sb, " %s×%d (%.1f MB)", typ, counts[typ], float64(bytesOf[typ])/1e6)
	}
	t.Log(sb.String())
}

// BenchmarkOpen measures opening the real model: mapping it and parsing
// its header, of which the two 49k-string tokenizer arrays are most.
func BenchmarkOpen(b *testing.B) {
	path := modelPath(b)
	b.ReportAllocs()
	for b.Loop() {
		f, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
