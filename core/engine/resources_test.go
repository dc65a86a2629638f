package engine

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/model"
	"github.com/lmstream/lmstream/core/sample"
	"github.com/lmstream/lmstream/core/status"
	"github.com/lmstream/lmstream/internal/testmodel"
)

var defaultModel = filepath.Join("..", "..", "models", "SmolLM2-135M-Instruct.Q4_1.gguf")

// TestHugePromptRefusedWithoutTokenizing is issue 10 item 5: lms_submit
// tokenized on the caller's thread, so a 10 MB CJK prompt blocked it for
// 2.8 s before PROMPT_TOO_LONG. Its byte count alone proves it cannot fit,
// and Prepare must say so without handing a byte to the tokenizer.
func TestHugePromptRefusedWithoutTokenizing(t *testing.T) {
	testmodel.Need(t, defaultModel)
	cfg, err := loop.ParseConfig([]byte(`{"model_path":"` + defaultModel + `","max_slots":1,"context_length":2048,"spec_budget":8}`))
	require.NoError(t, err)
	be, err := newCPU(cfg)
	require.NoError(t, err)
	defer be.Close()
	b := be.(*Backend)
	require.Positive(t, b.maxTokenBytes)
	t.Logf("a token of the default model covers at most %d prompt bytes", b.maxTokenBytes)

	prepare := func(prompt string) error {
		js, err := json.Marshal(map[string]any{"prompt": prompt})
		require.NoError(t, err)
		req, err := loop.ParseRequest(js)
		require.NoError(t, err)
		_, err = b.Prepare(req)
		return err
	}
	cjk := strings.Repeat("漢字仮名交じり文", 10<<20/24) // 10 MB of 3-byte characters
	err = prepare(cjk)
	require.Equal(t, status.PromptTooLong, status.CodeOf(err), "%v", err)
	require.Contains(t, err.Error(), fmt.Sprintf("%d bytes", len(cjk)))
	require.Zero(t, b.tokenized.Load(), "the prompt was tokenized before being refused")

	// The same chat turn through "messages": the template renders it, and
	// the rendered text is refused the same way.
	js, _ := json.Marshal(map[string]any{"messages": []map[string]string{{"role": "user", "content": cjk}}})
	req, err := loop.ParseRequest(js)
	require.NoError(t, err)
	_, err = b.Prepare(req)
	require.Equal(t, status.PromptTooLong, status.CodeOf(err), "%v", err)
	require.Zero(t, b.tokenized.Load())

	// A prompt the bound cannot decide is tokenized and judged exactly:
	// too long by its token count, or accepted.
	err = prepare(strings.Repeat("word ", 3000))
	require.Equal(t, status.PromptTooLong, status.CodeOf(err), "%v", err)
	require.Regexp(t, `prompt 0 has 30\d\d tokens; the context holds 2048`, err.Error())
	require.Equal(t, int64(15000), b.tokenized.Load())
	require.NoError(t, prepare("Hello"))
}

// TestCloseStopsEveryModel: Close frees the target's and a separate draft
// model's pools and weights (each model's workers are goroutines that only
// Close ends).
func TestCloseStopsEveryModel(t *testing.T) {
	dir := t.TempDir()
	target := tinyFile(t, dir, 64, 1, 1)
	draft := tinyFile(t, dir, 64, 2, 1)
	before := settledGoroutines()
	cfg, err := loop.ParseConfig([]byte(`{"model_path":"` + target + `","max_slots":2,"threads":3,"context_length":64,"spec_budget":6,"draft_model_path":"` + draft + `"}`))
	require.NoError(t, err)
	be, err := newCPU(cfg)
	require.NoError(t, err)
	b := be.(*Backend)
	require.GreaterOrEqual(t, runtime.NumGoroutine(), before+4, "two models with 3-thread pools")
	out := generate(t, b, []int32{1, 5, 6, 7}, sample.Params{RepetitionPenalty: 1}, draftModel, 6)
	require.Len(t, out, 6)
	tm, dm := b.model.(model.CPU).Model, b.drafts.model.dm.m.(model.CPU).Model
	require.NotSame(t, tm, dm)
	require.NoError(t, b.Close())
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	require.LessOrEqual(t, runtime.NumGoroutine(), before, "model worker goroutines outlive Close")
	for _, m := range []*model.Model{tm, dm} {
		var bt model.Batch
		require.Error(t, m.Forward(&bt, nil), "a closed model still runs")
	}
}

// settledGoroutines waits, up to 5 s, for goroutines that earlier tests
// left winding down (an abandoned template render ends at its next budget
// check) to end: the count unchanged for 200 ms. It returns that count.
func settledGoroutines() int {
	n, since := runtime.NumGoroutine(), time.Now()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if m := runtime.NumGoroutine(); m != n {
			n, since = m, time.Now()
		} else if time.Since(since) > 200*time.Millisecond {
			break
		}
	}
	return n
}
