package engine_test

import (
	"testing"

	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/internal/testmodel"
)

// BenchmarkConstrainedDecode compares the decode rate (1/TPOT: prefill
// excluded) of constrained and unconstrained greedy requests on the
// default model, without speculation so the figure is the mask's cost
// alone. Each iteration runs one request of each kind on the same prompt;
// "ratio" is constrained over unconstrained tokens per second (issue 13's
// goal: at least 0.9). `make bench` runs it.
func BenchmarkConstrainedDecode(b *testing.B) {
	testmodel.Need(b, modelPath)
	rt, err := loop.New([]byte(`{"model_path":"` + modelPath + `","max_slots":1,"context_length":1024,"spec_budget":12}`))
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	const prompt = `"messages":[{"role":"user","content":"Describe three users of a web site as JSON, with names, ages, roles and addresses."}],"max_tokens":160,"speculate":false`
	// Greedy and plainly sampled requests compute the mask only when the
	// model's token is refused; truncating ones (top-k, top-p, min-p)
	// test the likeliest tokens in rank order and compute it only where
	// that does not settle the cut.
	schema := `,"response_format":{"type":"json_schema","json_schema":{"name":"p","schema":{"type":"array","items":` + personSchema + `}}}`
	const sampled = `,"temperature":0.8,"seed":7`
	type kind struct {
		name, fields string
		base         int // the unconstrained kind it is compared with
	}
	kinds := []kind{
		{"unconstrained", "", 0},
		{"json_schema", schema, 0},
		{"json_object", `,"response_format":{"type":"json_object"}`, 0},
		{"sampled-unconstrained", sampled, 3},
		{"sampled-json_schema", schema + sampled, 3},
	}
	for _, cut := range []struct{ name, fields string }{
		{"top_k", `,"top_k":40`},
		{"top_p", `,"top_p":0.9`},
		{"min_p", `,"min_p":0.05`},
		{"top_k+top_p+min_p", `,"top_k":40,"top_p":0.95,"min_p":0.05`},
	} {
		base := len(kinds)
		kinds = append(kinds,
			kind{cut.name + "-unconstrained", sampled + cut.fields, base},
			kind{cut.name + "-json_schema", schema + sampled + cut.fields, base})
	}
	rate := make([]float64, len(kinds)) // tokens per second of decoding, summed
	toks := make([]int, len(kinds))
	for b.Loop() {
		for k, kd := range kinds {
			out, err := rt.Complete([]byte(`{` + prompt + kd.fields + `}`))
			if err != nil {
				b.Fatal(err)
			}
			u := out[0].Usage
			if u.TPOTMs <= 0 {
				b.Fatalf("%s: no decode time (%d tokens)", kd.name, u.GeneratedTokens)
			}
			rate[k] += 1000 / u.TPOTMs
			toks[k] += u.GeneratedTokens
		}
	}
	n := float64(b.N)
	for k, kd := range kinds {
		b.ReportMetric(rate[k]/n, kd.name+"-tok/s")
		if k != kd.base {
			b.ReportMetric(rate[k]/rate[kd.base], kd.name+"-ratio")
		}
	}
	b.Logf("tokens per request: %v", toks)
}
