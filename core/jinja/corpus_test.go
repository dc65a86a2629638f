package jinja

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

// The corpus: real models' chat templates (llama.cpp's models/templates
// at commit 34af94cd9) with what Python's jinja2 renders for each
// scenario, in ../chat/testdata (generate.py writes them).
const corpusDir = "../chat/testdata"

type corpusScenario struct {
	Name                string          `json:"name"`
	AddGenerationPrompt bool            `json:"add_generation_prompt"`
	Tools               bool            `json:"tools"`
	Vars                json.RawMessage `json:"vars"`
	Messages            json.RawMessage `json:"messages"`
}

type corpusSpec struct {
	Now       string           `json:"now"`
	Tools     json.RawMessage  `json:"tools"`
	Scenarios []corpusScenario `json:"scenarios"`
}

type corpusResult struct {
	Scenario string  `json:"scenario"`
	Output   *string `json:"output"`
	Raised   *string `json:"raised"`
	Error    *string `json:"error"`
}

type corpusExpected struct {
	Template string         `json:"template"`
	BOS      string         `json:"bos_token"`
	EOS      string         `json:"eos_token"`
	Results  []corpusResult `json:"results"`
}

func loadCorpus(t testing.TB) (corpusSpec, []string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(corpusDir, "scenarios.json"))
	require.NoError(t, err)
	var spec corpusSpec
	require.NoError(t, json.Unmarshal(data, &spec))
	names, err := filepath.Glob(filepath.Join(corpusDir, "templates", "*.jinja"))
	require.NoError(t, err)
	require.NotEmpty(t, names)
	return spec, names
}

// The engine renders every template of the corpus, for every scenario,
// byte for byte as jinja2 does, and fails where jinja2 fails (with the
// template's own message where the template raised).
func TestCorpusMatchesJinja2(t *testing.T) {
	spec, names := loadCorpus(t)
	now, err := time.Parse("2006-01-02T15:04:05", spec.Now)
	require.NoError(t, err)
	tools, err := FromJSON(spec.Tools)
	require.NoError(t, err)
	identical, renders := 0, 0
	for _, path := range names {
		base := strings.TrimSuffix(filepath.Base(path), ".jinja")
		src, err := os.ReadFile(path)
		require.NoError(t, err)
		data, err := os.ReadFile(filepath.Join(corpusDir, "expected", base+".json"))
		require.NoError(t, err)
		var want corpusExpected
		require.NoError(t, json.Unmarshal(data, &want))
		tmpl, err := Parse(string(src))
		if !assert(t, err == nil, "%s: parse: %v", base, err) {
			continue
		}
		same := true
		for i, sc := range spec.Scenarios {
			exp := want.Results[i]
			require.Equal(t, sc.Name, exp.Scenario)
			msgs, err := FromJSON(sc.Messages)
			require.NoError(t, err)
			vars := map[string]Value{
				"messages":              msgs,
				"tools":                 nil,
				"documents":             nil,
				"add_generation_prompt": sc.AddGenerationPrompt,
				"bos_token":             want.BOS,
				"eos_token":             want.EOS,
			}
			if sc.Tools {
				vars["tools"] = tools
			}
			if len(sc.Vars) > 0 {
				extra, err := FromJSON(sc.Vars)
				require.NoError(t, err)
				d := extra.(*Dict)
				for j, k := range d.Keys() {
					vars[k.(string)] = d.Values()[j]
				}
			}
			got, err := tmpl.Render(context.Background(), vars, Options{Now: now})
			renders++
			switch {
			case exp.Output != nil:
				if !assert(t, err == nil, "%s/%s: %v", base, sc.Name, err) {
					same = false
					continue
				}
				if !assert(t, got == *exp.Output, "%s/%s: output differs:\n got: %q\nwant: %q", base, sc.Name, got, *exp.Output) {
					same = false
				}
			case exp.Raised != nil:
				var raised *RaiseError
				ok := assert(t, errors.As(err, &raised), "%s/%s: want the template to raise %q, got %v", base, sc.Name, *exp.Raised, err)
				if ok {
					ok = assert(t, raised.Msg == *exp.Raised, "%s/%s: raised %q, want %q", base, sc.Name, raised.Msg, *exp.Raised)
				}
				same = same && ok
			default:
				if !assert(t, err != nil, "%s/%s: want an error like jinja2's %q, got output %q", base, sc.Name, *exp.Error, got) {
					same = false
				}
			}
		}
		if same {
			identical++
		}
	}
	t.Logf("%d of %d templates identical to jinja2 in all %d scenarios (%d renders)", identical, len(names), len(spec.Scenarios), renders)
}

func assert(t *testing.T, ok bool, format string, args ...any) bool {
	t.Helper()
	if !ok {
		t.Errorf(format, args...)
	}
	return ok
}
