package engine_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBaselinePoliciesStreamPlainTokens: on the default model, the
// baseline policies without speculation ("sarathi" and "vllm", the latter
// pausing decoding while a new prompt prefills) stream each request's
// greedy tokens exactly as plain decoding alone does, with requests
// joining at random iterations and prompts longer than a prefill chunk.
func TestBaselinePoliciesStreamPlainTokens(t *testing.T) {
	const maxTokens = 24
	all := prompts(t, "chat.jsonl")[:3]
	var reqs [][]byte
	for _, p := range all {
		reqs = append(reqs, chatRequest(p, maxTokens, nil))
	}
	// Plain decoding: "incremental" never speculates; one request at a time.
	plain := newRuntime(t, `,"spec_policy":"incremental","prefill_chunk":16`)
	var want [][]int32
	for _, r := range reqs {
		got, _ := runAll(t, plain, [][]byte{r}, 1, 0)
		want = append(want, got[0])
	}
	for _, policy := range []string{"sarathi", "vllm"} {
		t.Run(policy, func(t *testing.T) {
			rt := newRuntime(t, `,"spec_policy":"`+policy+`","prefill_chunk":16`)
			got, last := runAll(t, rt, reqs, 1, 3)
			for i := range reqs {
				require.Equal(t, want[i], got[i], "prompt %d", i)
				require.Zero(t, last[i].Usage.VerifyPasses, "no speculation")
			}
		})
	}
}
