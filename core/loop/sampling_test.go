package loop_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/sample"
	"github.com/lmstream/lmstream/core/status"
)

// Every sampling field, penalties included, is parsed, defaulted, checked
// and made canonical in the request, once: the backends get sample.Params.
func TestSamplingFieldsOneHome(t *testing.T) {
	r, err := loop.ParseRequest([]byte(`{"prompt":"x"}`))
	require.NoError(t, err)
	require.Equal(t, sample.Params{TopP: 1, RepetitionPenalty: 1, RepeatLastN: sample.DefaultRepeatLastN}, r.Sampling)

	r, err = loop.ParseRequest([]byte(`{"prompt":"x","temperature":1e-320,"top_p":0.9,"top_k":5,"min_p":0.1,"seed":7,
		"repetition_penalty":0,"presence_penalty":-1.5,"frequency_penalty":2,"repeat_last_n":0}`))
	require.NoError(t, err)
	require.Equal(t, sample.Params{TopP: 0.9, TopK: 5, MinP: 0.1, Seed: 7, HasSeed: true,
		RepetitionPenalty: 1, PresencePenalty: -1.5, FrequencyPenalty: 2, RepeatLastN: sample.DefaultRepeatLastN}, r.Sampling)
	require.NoError(t, r.Extra.Rest(), "nothing is left for the backend")

	for in, msg := range map[string]string{
		`{"prompt":"x","temperature":101}`:          `"temperature" must be in [0, 100], got 101`,
		`{"prompt":"x","top_p":0}`:                  `"top_p" must be in (0, 1], got 0`,
		`{"prompt":"x","repetition_penalty":0.001}`: `"repetition_penalty" must be 0 or 1 (off) or in [0.01, 100], got 0.001`,
		`{"prompt":"x","presence_penalty":-101}`:    `"presence_penalty" must be in [-100, 100], got -101`,
		`{"prompt":"x","repeat_last_n":1048577}`:    `"repeat_last_n" must be in [0, 1048576], got 1048577`,
		`{"prompt":"x","frequency_penalty":"high"}`: `"frequency_penalty" must be a number`,
	} {
		_, err := loop.ParseRequest([]byte(in))
		require.Equal(t, status.InvalidRequest, status.CodeOf(err), in)
		require.ErrorContains(t, err, msg, in)
	}
}
