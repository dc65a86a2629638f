package engine_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/cuda"
	"github.com/lmstream/lmstream/core/engine"
	"github.com/lmstream/lmstream/core/jsonstrict"
	"github.com/lmstream/lmstream/core/loop"
)

// headerFields are the fields include/lmstream.h documents in the comment
// of the function named fn: each is a line "**   "name" ..." (several
// names separated by commas before the colon), between the comment's
// "Config fields:" or "request_json fields" line and its end.
func headerFields(t *testing.T, fn string) []string {
	t.Helper()
	text, err := os.ReadFile(filepath.Join("..", "..", "include", "lmstream.h"))
	require.NoError(t, err)
	end := strings.Index(string(text), fn+"(")
	require.Positive(t, end, "lmstream.h declares %s", fn)
	start := strings.LastIndex(string(text[:end]), "/*")
	entry := regexp.MustCompile(`(?m)^\*\*   ((?:"[a-z_]+"(?:, )?)+):`)
	name := regexp.MustCompile(`"([a-z_]+)"`)
	var out []string
	for _, m := range entry.FindAllStringSubmatch(string(text[start:end]), -1) {
		for _, n := range name.FindAllStringSubmatch(m[1], -1) {
			out = append(out, n[1])
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestHeaderDocumentsEveryField: the config fields lms_runtime_create
// documents are exactly those the runtime, the engine and the CUDA device
// ask a config for, and the request fields lms_submit documents exactly
// those the request parser and the engine ask a request for, so the
// header and the parsers cannot drift apart; likewise the fields
// lms_render_chat documents and those its parser asks for.
func TestHeaderDocumentsEveryField(t *testing.T) {
	path := engine.TinyFile(t, t.TempDir(), 64, 5, 4)
	stop := jsonstrict.Record()
	rt, err := loop.New([]byte(`{"model_path":"` + path + `","threads":1,"context_length":64,"max_slots":1}`))
	require.NoError(t, err)
	_, err = rt.Complete([]byte(`{"prompt":"a","max_tokens":1}`))
	require.NoError(t, err)
	rt.Close()
	cfg, err := loop.ParseConfig([]byte(`{}`))
	require.NoError(t, err)
	_, err = cuda.Device(cfg) // takes its fields before it looks for a GPU
	require.NoError(t, err)
	got := stop()

	require.Equal(t, headerFields(t, "lms_runtime_create"), got["config"], "config fields: lmstream.h (want) against the parsers (got)")
	require.Equal(t, headerFields(t, "lms_submit"), got["request"], "request fields: lmstream.h (want) against the parsers (got)")

	stop = jsonstrict.Record()
	_, err = loop.ParseChat([]byte(`{"messages":[{"role":"user","content":"a"}]}`))
	require.NoError(t, err)
	require.Equal(t, headerFields(t, "lms_render_chat"), stop()["request"], "render fields: lmstream.h (want) against loop.ParseChat (got)")
}
