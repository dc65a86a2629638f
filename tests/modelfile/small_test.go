package modelfile

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/quant"
)

// smallModel writes a valid Llama-style GGUF of 2 layers with a byte-level
// BPE tokenizer: every field a real model has, at sizes that load and
// generate in milliseconds. Layer matrices are wt, the tied embedding
// Q8_0.
func smallModel(t testing.TB, wt quant.Type) []byte {
	t.Helper()
	return smallModelWithTemplate(t, wt, "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}")
}

// smallModelWithTemplate is smallModel with chatTemplate as its
// tokenizer.chat_template.
func smallModelWithTemplate(t testing.TB, wt quant.Type, chatTemplate string) []byte {
	t.Helper()
	const (
		layers, embd, heads, kvHeads, ff = 2, 64, 4, 2, 128
	)
	// Tokens: the byte-level forms of printable ASCII ('Ġ' is the space),
	// a few merged pieces, and the special tokens.
	tokens := []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"}
	types := []int32{3, 3, 3}
	for c := '!'; c <= '~'; c++ {
		tokens = append(tokens, string(c))
		types = append(types, 1)
	}
	tokens = append(tokens, "Ġ", "He", "ll", "Ġw", "or", "Hell", "Hello", "Ġwor", "Ġworld")
	types = append(types, 1, 1, 1, 1, 1, 1, 1, 1, 1)
	merges := []string{"H e", "l l", "Ġ w", "o r", "He ll", "Hell o", "Ġw or", "Ġwor l"}
	tokens = append(tokens, "Ġworl")
	types = append(types, 1)
	merges = append(merges, "Ġworl d")
	vocab := len(tokens)

	w := gguf.NewWriter()
	for _, kv := range []struct {
		k string
		v any
	}{
		{"general.architecture", "llama"},
		{"general.name", "mutator-small"},
		{"llama.block_count", uint32(layers)},
		{"llama.context_length", uint32(256)},
		{"llama.embedding_length", uint32(embd)},
		{"llama.feed_forward_length", uint32(ff)},
		{"llama.attention.head_count", uint32(heads)},
		{"llama.attention.head_count_kv", uint32(kvHeads)},
		{"llama.rope.freq_base", float32(10000)},
		{"llama.attention.layer_norm_rms_epsilon", float32(1e-5)},
		{"llama.rope.dimension_count", uint32(embd / heads)},
		{"tokenizer.ggml.model", "gpt2"},
		{"tokenizer.ggml.pre", "smollm"},
		{"tokenizer.ggml.tokens", tokens},
		{"tokenizer.ggml.token_type", types},
		{"tokenizer.ggml.merges", merges},
		{"tokenizer.ggml.bos_token_id", uint32(1)},
		{"tokenizer.ggml.eos_token_id", uint32(2)},
		{"tokenizer.ggml.unknown_token_id", uint32(0)},
		{"tokenizer.ggml.padding_token_id", uint32(2)},
		{"tokenizer.ggml.add_bos_token", false},
		{"tokenizer.chat_template", chatTemplate},
	} {
		require.NoError(t, w.AddKV(kv.k, kv.v))
	}
	r := rand.New(rand.NewPCG(7, 7))
	add := func(name string, typ quant.Type, dims []int, sd float64, mean float32) {
		n := 1
		for _, d := range dims {
			n *= d
		}
		x := make([]float32, n)
		for i := range x {
			x[i] = mean + float32(r.NormFloat64()*sd)
		}
		rb, err := typ.RowBytes(dims[0])
		require.NoError(t, err)
		data := make([]byte, rb*(n/dims[0]))
		if typ == quant.F32 {
			for i, v := range x {
				b := math.Float32bits(v)
				data[4*i], data[4*i+1], data[4*i+2], data[4*i+3] = byte(b), byte(b>>8), byte(b>>16), byte(b>>24)
			}
		} else {
			require.NoError(t, quant.Quantize(typ, x, data))
		}
		require.NoError(t, w.AddTensor(name, typ, dims, data))
	}
	hd := embd / heads
	add("token_embd.weight", quant.Q8_0, []int{embd, vocab}, 1, 0)
	add("output_norm.weight", quant.F32, []int{embd}, 0.1, 1)
	for l := range layers {
		p := fmt.Sprintf("blk.%d.", l)
		s := 1 / math.Sqrt(embd)
		add(p+"attn_norm.weight", quant.F32, []int{embd}, 0.1, 1)
		add(p+"attn_q.weight", wt, []int{embd, heads * hd}, s, 0)
		add(p+"attn_k.weight", wt, []int{embd, kvHeads * hd}, s, 0)
		add(p+"attn_v.weight", wt, []int{embd, kvHeads * hd}, s, 0)
		add(p+"attn_output.weight", wt, []int{heads * hd, embd}, s, 0)
		add(p+"ffn_norm.weight", quant.F32, []int{embd}, 0.1, 1)
		add(p+"ffn_gate.weight", wt, []int{embd, ff}, s, 0)
		add(p+"ffn_up.weight", wt, []int{embd, ff}, s, 0)
		add(p+"ffn_down.weight", wt, []int{ff, embd}, 1/math.Sqrt(ff), 0)
	}
	var buf bytes.Buffer
	_, err := w.WriteTo(&buf)
	require.NoError(t, err)
	return buf.Bytes()
}
