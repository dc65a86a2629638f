package main

import (
	"fmt"
	"time"

	"github.com/lmstream/lmstream/spec/sim"
)

// record is what the real engine did with one request of a workload, as
// the harness saw it: the request the workload generator drew, the time
// (from the start of the run) at which each generated token reached its
// channel, and how many chunks carried them.
type record struct {
	Req    sim.Request
	Tokens []time.Duration // one per generated token, in order
	Chunks int             // non-empty chunks after the first token's
	// From the terminal chunk's usage: the prompt's length after the chat
	// template, and the draft tokens proposed and accepted.
	PromptTokens       int
	Proposed, Accepted int
	Err                string // set when the request failed
}

// runOf turns a run's records into the simulator's Run, so that the
// engine's numbers come from the same metric code as the simulator's
// (sim.Summarize): TTFT from the request's scheduled arrival to its first
// token, TPOT over the tokens after the first, a request attaining when
// that TPOT is within its SLO. Records must be in arrival order. A request
// that failed or produced no token has no TPOT to judge, and counting it
// either way would bend the comparison: it is an error.
func runOf(recs []record) (*sim.Run, error) {
	run := &sim.Run{}
	for i, r := range recs {
		if r.Err != "" {
			return nil, fmt.Errorf("request %d failed: %s", r.Req.ID, r.Err)
		}
		if len(r.Tokens) == 0 {
			return nil, fmt.Errorf("request %d generated no token", r.Req.ID)
		}
		if i > 0 && r.Req.Arrival < recs[i-1].Req.Arrival {
			return nil, fmt.Errorf("records not in arrival order at request %d", r.Req.ID)
		}
		for k := 1; k < len(r.Tokens); k++ {
			if r.Tokens[k] < r.Tokens[k-1] {
				return nil, fmt.Errorf("request %d: token times go backwards at token %d", r.Req.ID, k)
			}
		}
		first, last := r.Tokens[0], r.Tokens[len(r.Tokens)-1]
		if first < r.Req.Arrival {
			return nil, fmt.Errorf("request %d: first token at %v, before its arrival at %v", r.Req.ID, first, r.Req.Arrival)
		}
		res := sim.Result{Request: r.Req, First: first, Last: last, Generated: len(r.Tokens)}
		res.Request.Output = len(r.Tokens)
		if r.PromptTokens > 0 {
			res.Request.Prompt = r.PromptTokens
		}
		run.Results = append(run.Results, res)
		run.End = max(run.End, last)
		run.Emitted += len(r.Tokens) - 1
		run.Decodes += r.Chunks
	}
	return run, nil
}

// asWorkload is the workload the engine actually served, for the
// simulator to replay: each request with the engine's prompt length (after
// the chat template) and the tokens it generated (an answer may end before
// max_tokens), so that the two differ only in how they serve it.
func asWorkload(run *sim.Run) []sim.Request {
	out := make([]sim.Request, len(run.Results))
	for i, r := range run.Results {
		out[i] = r.Request
	}
	return out
}
