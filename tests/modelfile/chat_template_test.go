package modelfile

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/quant"
	"github.com/lmstream/lmstream/core/status"
)

// Issue 47: a chat template is code from the model file, and each of these
// aborted the process (a stack overflow or out of memory, both fatal in
// Go) when the runtime was created or at the first chat request. Shipped
// as tokenizer.chat_template, each now leaves the runtime standing: the
// model loads, a raw prompt still generates, and a request with
// "messages" fails with LMS_ERR_INVALID_REQUEST saying why, with no
// goroutine left behind.
func TestHostileChatTemplateInModelFile(t *testing.T) {
	hostile := map[string]string{
		"extends itself":   "{% extends '/chat_template' %}",
		"parentheses 300k": "{{ " + strings.Repeat("(", 300_000) + "1" + strings.Repeat(")", 300_000) + " }}",
		"brackets 100k":    "{{ " + strings.Repeat("[", 100_000) + "1" + strings.Repeat("]", 100_000) + " }}",
		"budget variable":  "{% set __lmstream_render_budget__ = 0 %}{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",
		"center 1e11":      "{{ 'x' | center(100000000000) }}",
		"repeat 1e11":      "{{ 'x' * 100000000000 }}",
		"chained replace":  "{{ 'x'" + strings.Repeat("|replace('x', 'xxxxxxxxxx')", 12) + " }}",
		"repeat 1e9":       "{{ 'x' * 1000000000 }}",
		"indent 1e9":       "{{ 'x' | indent(1000000000) }}",
		"endless loop":     "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
	}
	for name, tmpl := range hostile {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "hostile.gguf")
			require.NoError(t, os.WriteFile(path, smallModelWithTemplate(t, quant.Q8_0, tmpl), 0o600))
			rt, err := loop.New([]byte(`{"model_path":"` + path + `","max_slots":1,"context_length":64,"threads":1,"drafter":"none"}`))
			require.NoError(t, err)
			defer rt.Close()
			goroutines := runtime.NumGoroutine()
			for range 2 {
				_, err = rt.Complete([]byte(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`))
				require.Error(t, err)
				require.Equal(t, status.InvalidRequest, status.CodeOf(err), "%v", err)
				require.Contains(t, err.Error(), "jinja")
			}
			// The renders ran on this goroutine and are over.
			require.LessOrEqual(t, runtime.NumGoroutine(), goroutines)
			res, err := rt.Complete([]byte(`{"prompt":"Hello","max_tokens":2,"temperature":0}`))
			require.NoError(t, err)
			require.Len(t, res, 1)
		})
	}
}
