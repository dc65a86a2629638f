package reply

import (
	"encoding/json"
	"math/rand/v2"
	"regexp"
	"testing"

	"github.com/lmstream/lmstream/streaming"
)

// feed writes chunks to a fresh parser as a stream does (a Take after
// every write, a final Take at the end) and merges what it returns.
func feed(f Format, o Options, chunks []string) streaming.Reply {
	p := New(f, o)
	var r streaming.Reply
	for _, c := range chunks {
		p.Write([]byte(c))
		t := p.Take(false)
		r.Merge(&t)
	}
	t := p.Take(true)
	r.Merge(&t)
	return r
}

// splits are the ways the tests cut an answer: whole, byte by byte, and
// n random cuts (seeded: a failure reproduces).
func splits(text string, n int, seed uint64) [][]string {
	out := [][]string{{text}}
	bytes := make([]string, len(text))
	for i := 0; i < len(text); i++ {
		bytes[i] = text[i : i+1]
	}
	out = append(out, bytes)
	rng := rand.New(rand.NewPCG(seed, uint64(len(text))))
	for range n {
		var cuts []string
		for i := 0; i < len(text); {
			j := min(len(text), i+1+rng.IntN(12))
			cuts = append(cuts, text[i:j])
			i = j
		}
		out = append(out, cuts)
	}
	return out
}

var (
	openAIID  = regexp.MustCompile(`^call_[A-Za-z0-9]{24}$`)
	mistralID = regexp.MustCompile(`^[A-Za-z0-9]{9}$`)
)

// checkCalls asserts the calls' indices, ids and arguments are well formed
// (ids: the model's own where ids lists them, "" entries random) and
// returns the reply with ids cleared.
func checkCalls(t *testing.T, f Format, r streaming.Reply, ids []string) streaming.Reply {
	t.Helper()
	calls := make([]streaming.ToolCallDelta, len(r.ToolCalls))
	copy(calls, r.ToolCalls)
	for i, c := range calls {
		if c.Index != int32(i) {
			t.Errorf("call %d has index %d", i, c.Index)
		}
		var obj map[string]any
		if json.Unmarshal([]byte(c.Arguments), &obj) != nil {
			t.Errorf("call %d arguments are not a JSON object: %q", i, c.Arguments)
		}
		switch {
		case i < len(ids) && ids[i] != "":
			if c.ID != ids[i] {
				t.Errorf("call %d id %q, want the model's %q", i, c.ID, ids[i])
			}
		case f == Mistral && !mistralID.MatchString(c.ID), f != Mistral && !openAIID.MatchString(c.ID):
			t.Errorf("call %d id %q is not a %s id", i, c.ID, f)
		}
		calls[i].ID = ""
	}
	r.ToolCalls = calls
	if len(calls) == 0 {
		r.ToolCalls = nil
	}
	return r
}
