package chat

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The corpus (testdata/): 68 real chat templates, the conversations they
// are rendered with, and what Python's jinja2 renders for each in
// apply_chat_template's environment (generate.py).

type corpusScenario struct {
	Name                string         `json:"name"`
	AddGenerationPrompt bool           `json:"add_generation_prompt"`
	Tools               bool           `json:"tools"`
	Vars                map[string]any `json:"vars"`
	Messages            []Message      `json:"messages"`
}

type corpusSpec struct {
	Now       string            `json:"now"`
	Tools     []json.RawMessage `json:"tools"`
	Scenarios []corpusScenario  `json:"scenarios"`
}

type corpusResult struct {
	Scenario string  `json:"scenario"`
	Output   *string `json:"output"`
	Raised   *string `json:"raised"`
	Error    *string `json:"error"`
}

type corpusExpected struct {
	BOS     string         `json:"bos_token"`
	EOS     string         `json:"eos_token"`
	Results []corpusResult `json:"results"`
}

// Every template renders every conversation, given as Messages, byte for
// byte as jinja2 does; where jinja2 fails, the render fails too, with the
// template's own message where the template raised.
func TestCorpusMatchesJinja2(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "scenarios.json"))
	require.NoError(t, err)
	var spec corpusSpec
	require.NoError(t, json.Unmarshal(data, &spec))
	now, err := time.Parse("2006-01-02T15:04:05", spec.Now)
	require.NoError(t, err)
	paths, err := filepath.Glob(filepath.Join("testdata", "templates", "*.jinja"))
	require.NoError(t, err)
	require.Len(t, paths, 68)
	identical := 0
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), ".jinja")
		src, err := os.ReadFile(path)
		require.NoError(t, err)
		data, err := os.ReadFile(filepath.Join("testdata", "expected", name+".json"))
		require.NoError(t, err)
		var want corpusExpected
		require.NoError(t, json.Unmarshal(data, &want))
		m, err := ForModel(string(src), want.BOS, want.EOS)
		require.NoError(t, err, name)
		require.Equal(t, "jinja", m.Name(), name)
		m.Jinja().Now = func() time.Time { return now }
		same := true
		for i, sc := range spec.Scenarios {
			exp := want.Results[i]
			require.Equal(t, sc.Name, exp.Scenario)
			c := Conversation{Messages: sc.Messages, AddGenerationPrompt: sc.AddGenerationPrompt, Vars: sc.Vars}
			if sc.Tools {
				c.Tools = spec.Tools
			}
			got, err := m.RenderConversation(context.Background(), c)
			switch {
			case exp.Output != nil:
				if err != nil || got != *exp.Output {
					same = false
					t.Errorf("%s/%s: err %v\n got: %q\nwant: %q", name, sc.Name, err, got, *exp.Output)
				}
			case exp.Raised != nil:
				var rejected *TemplateError
				if !errors.As(err, &rejected) || rejected.Msg != *exp.Raised {
					same = false
					t.Errorf("%s/%s: want the template to raise %q, got %v", name, sc.Name, *exp.Raised, err)
				}
			default:
				if err == nil {
					same = false
					t.Errorf("%s/%s: jinja2 fails (%s), but this rendered %q", name, sc.Name, *exp.Error, got)
				}
			}
		}
		if same {
			identical++
		}
	}
	t.Logf("%d of %d templates identical to jinja2 for all %d conversations", identical, len(paths), len(spec.Scenarios))
}
