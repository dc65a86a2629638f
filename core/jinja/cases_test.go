package jinja

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// jinjaCase is one of testdata/cases.json: a small template, its
// variables, and what jinja2 made of it (gen_cases.py).
type jinjaCase struct {
	Name     string          `json:"name"`
	Template string          `json:"template"`
	Vars     json.RawMessage `json:"vars"`
	Output   *string         `json:"output"`
	Error    *string         `json:"error"`
	Raised   *string         `json:"raised"`
}

func loadCases(t testing.TB) []jinjaCase {
	data, err := os.ReadFile("testdata/cases.json")
	require.NoError(t, err)
	var cases []jinjaCase
	require.NoError(t, json.Unmarshal(data, &cases))
	return cases
}

var caseNow = time.Date(2025, 3, 14, 9, 26, 53, 0, time.UTC)

func renderCase(c jinjaCase) (string, error) {
	tmpl, err := Parse(c.Template)
	if err != nil {
		return "", err
	}
	vars := map[string]Value{}
	if len(c.Vars) > 0 {
		v, err := FromJSON(c.Vars)
		if err != nil {
			return "", err
		}
		d := v.(*Dict)
		for i, k := range d.Keys() {
			vars[k.(string)] = d.Values()[i]
		}
	}
	return tmpl.Render(context.Background(), vars, Options{Now: caseNow})
}

// Each case renders as jinja2 renders it, and fails where jinja2 fails:
// at parse time where jinja2 cannot compile the template, with the same
// exception kind where it fails at run time, with the template's own
// message where the template raised.
func TestCasesMatchJinja2(t *testing.T) {
	for _, c := range loadCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			got, err := renderCase(c)
			switch {
			case c.Output != nil:
				require.NoError(t, err, "template %q", c.Template)
				require.Equal(t, *c.Output, got, "template %q", c.Template)
			case c.Raised != nil:
				var raised *RaiseError
				require.ErrorAs(t, err, &raised)
				require.Equal(t, *c.Raised, raised.Msg)
			default:
				require.Error(t, err, "template %q: jinja2 fails with %s; got %q", c.Template, *c.Error, got)
				kind, _, _ := strings.Cut(*c.Error, ":")
				if strings.Contains(*c.Error, "no loader") {
					// jinja2 fails when it renders; a chat template that
					// loads another is refused when it is parsed here.
					kind = "SyntaxError"
				}
				var syntax *SyntaxError
				switch kind {
				case "TemplateSyntaxError", "TemplateAssertionError", "SyntaxError":
					require.ErrorAs(t, err, &syntax, "jinja2: %s", *c.Error)
				case "TypeError", "UndefinedError", "ValueError", "SecurityError", "ZeroDivisionError",
					"OverflowError", "TemplateRuntimeError", "KeyError", "IndexError":
					var e *Error
					require.ErrorAs(t, err, &e, "jinja2: %s", *c.Error)
					require.Equal(t, kind, e.Kind, "jinja2: %s; we: %v", *c.Error, err)
				}
				t.Logf("jinja2: %s\n    we: %v", *c.Error, err)
			}
		})
	}
}
