// Package replay is a deterministic, scripted backend for testing everything
// above the model: streaming, finishing rules, cancellation, errors, the C
// ABI and the bindings.
//
// Its vocabulary is a list of pieces given in hex, so any byte sequence —
// invalid UTF-8, half a character — can be a token. A request carries a
// script: burst k is the list of tokens iteration k accepts (one token, or
// several as speculative decoding would). When the script runs out the
// backend emits the end token.
//
// Runtime config:
//
//	{"backend": "replay", "vocab": ["48", "e4b8", "f09f", ...],
//	 "special_ids": [..], "eos_id": N, "max_slots": 8}
//
// Request fields, besides the common ones:
//
//	"script": [[ids], [ids], ...]     the bursts of every batch item, or
//	"scripts": [script, script, ...]  one script per batch item
//	"delay_ms": d                     pace each slot at one burst per d ms
//	"hold_after": k                   after burst k, wait up to a minute for a
//	                                  cancellation before going on: a test
//	                                  that cancels after a chunk then does
//	                                  not race the script's pace
//	"error_at": k                     iteration k fails with a backend error
//	"panic_at": k                     iteration k panics (a Go panic)
//
// A scripted token is certain: with "logprobs" every token's
// log-probability is 0, and its only alternative ("top_logprobs" >= 1) is
// itself.
package replay

import (
	"encoding/hex"
	"fmt"
	"time"

	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/status"
	"github.com/lmstream/lmstream/streaming"
)

func init() { loop.Register("replay", New) }

// Vocab is a vocabulary of raw byte pieces.
type Vocab struct {
	pieces  [][]byte
	special []bool
}

func (v *Vocab) Size() int { return len(v.pieces) }

func (v *Vocab) Piece(id int32) []byte {
	if id < 0 || int(id) >= len(v.pieces) {
		return nil
	}
	return v.pieces[id]
}

func (v *Vocab) IsSpecial(id int32) bool {
	return id >= 0 && int(id) < len(v.special) && v.special[id]
}

// NewVocab builds a vocabulary from hex-encoded pieces.
func NewVocab(hexPieces []string, specialIDs []int32) (*Vocab, error) {
	v := &Vocab{pieces: make([][]byte, len(hexPieces)), special: make([]bool, len(hexPieces))}
	for i, h := range hexPieces {
		b, err := hex.DecodeString(h)
		if err != nil {
			return nil, status.Errorf(status.InvalidRequest, "config field \"vocab\": entry %d (%q) is not hex: %v", i, h, err)
		}
		v.pieces[i] = b
	}
	for _, id := range specialIDs {
		if id < 0 || int(id) >= len(v.pieces) {
			return nil, status.Errorf(status.InvalidRequest, "config field \"special_ids\": %d is not in the vocabulary (size %d)", id, len(v.pieces))
		}
		v.special[id] = true
	}
	return v, nil
}

// Backend replays scripts.
type Backend struct {
	vocab *Vocab
	eos   int32
}

// New builds the backend from the config's "vocab", "special_ids" and "eos_id".
func New(cfg *loop.Config) (loop.Backend, error) {
	var hexPieces []string
	var specials []int32
	eos := int32(-1)
	if _, err := cfg.Extra.Take("vocab", &hexPieces); err != nil {
		return nil, err
	}
	if len(hexPieces) == 0 {
		return nil, status.Errorf(status.InvalidRequest, `config: the replay backend needs a non-empty "vocab" (token pieces in hex)`)
	}
	if _, err := cfg.Extra.Take("special_ids", &specials); err != nil {
		return nil, err
	}
	if _, err := cfg.Extra.Take("eos_id", &eos); err != nil {
		return nil, err
	}
	if eos < 0 || int(eos) >= len(hexPieces) {
		return nil, status.Errorf(status.InvalidRequest, `config field "eos_id" must name a token of the vocabulary (0..%d), got %d`, len(hexPieces)-1, eos)
	}
	v, err := NewVocab(hexPieces, specials)
	if err != nil {
		return nil, err
	}
	return &Backend{vocab: v, eos: eos}, nil
}

func (b *Backend) Vocabulary() streaming.Vocabulary { return b.vocab }
func (b *Backend) EndOfGeneration(id int32) bool    { return id == b.eos }
func (b *Backend) Close() error                     { return nil }
func (b *Backend) Release(s *loop.Slot)             { s.State = nil }
func (b *Backend) Open(s *loop.Slot) error          { s.State = &sequence{item: s.Data.(*item)}; return nil }

// item is one batch item's script and pacing, shared by Prepare and Open.
type item struct {
	script    [][]int32
	delay     time.Duration
	holdAfter int // -1: none
	errorAt   int
	panicAt   int
}

// holdFor is how long "hold_after" waits: long enough for any consumer on a
// loaded machine, short enough that a test whose cancellation never comes
// still ends.
const holdFor = time.Minute

// paced says whether the slot's bursts wait for a time (readyAt).
func (it *item) paced() bool { return it.delay > 0 || it.holdAfter >= 0 }

// wait is how long the slot waits before burst pos.
func (it *item) wait(pos int) time.Duration {
	if pos == it.holdAfter {
		return holdFor
	}
	return it.delay
}

// sequence is the per-slot state: where in the script the slot is.
type sequence struct {
	*item
	pos     int
	readyAt time.Time
}

// Prepare takes the replay fields from the request.
func (b *Backend) Prepare(req *loop.Request) ([]loop.Prepared, error) {
	var script [][]int32
	var scripts [][][]int32
	var delayMs float64
	errorAt, panicAt, holdAfter := -1, -1, -1
	hasScript, err := req.Extra.Take("script", &script)
	if err != nil {
		return nil, err
	}
	hasScripts, err := req.Extra.Take("scripts", &scripts)
	if err != nil {
		return nil, err
	}
	for _, f := range []struct {
		key string
		dst any
	}{{"delay_ms", &delayMs}, {"hold_after", &holdAfter}, {"error_at", &errorAt}, {"panic_at", &panicAt}} {
		if _, err := req.Extra.Take(f.key, f.dst); err != nil {
			return nil, err
		}
	}
	n := req.Items()
	switch {
	case req.Grammar != nil:
		return nil, status.Errorf(status.InvalidRequest, `request: the replay backend plays scripted tokens and cannot follow "response_format" or "grammar"`)
	case hasScript && hasScripts:
		return nil, status.Errorf(status.InvalidRequest, `request: give "script" or "scripts", not both`)
	case hasScripts && len(scripts) != n:
		return nil, status.Errorf(status.InvalidRequest, `request field "scripts" has %d scripts for %d prompts`, len(scripts), n)
	case !hasScript && !hasScripts:
		return nil, status.Errorf(status.InvalidRequest, `request: the replay backend needs a "script" (token bursts) or "scripts"`)
	case delayMs < 0 || delayMs > 60_000:
		return nil, status.Errorf(status.InvalidRequest, `request field "delay_ms" must be in [0, 60000], got %g`, delayMs)
	case holdAfter < -1:
		return nil, status.Errorf(status.InvalidRequest, `request field "hold_after" must be a burst count (0 or more), got %d`, holdAfter)
	}
	out := make([]loop.Prepared, n)
	for i := range out {
		sc := script
		if hasScripts {
			sc = scripts[i]
		}
		for k, burst := range sc {
			for _, id := range burst {
				if id < 0 || int(id) >= b.vocab.Size() {
					return nil, status.Errorf(status.InvalidRequest, "request: script burst %d holds token %d, outside the vocabulary (size %d)", k, id, b.vocab.Size())
				}
			}
		}
		out[i].Data = &item{script: sc, delay: time.Duration(delayMs * float64(time.Millisecond)), holdAfter: holdAfter, errorAt: errorAt, panicAt: panicAt}
	}
	return out, nil
}

// certain is the logprobs of scripted tokens: each has probability 1.
func certain(tokens []int32, top bool) []streaming.TokenLogprob {
	out := make([]streaming.TokenLogprob, len(tokens))
	for i, id := range tokens {
		out[i].ID = id
		if top {
			out[i].Top = []streaming.Logprob{{ID: id}}
		}
	}
	return out
}

// Step emits each ready slot's next burst. Slots with a delay are paced: the
// step waits until the earliest is due, or returns early when the runtime
// is interrupted (a cancellation must not wait out the delay).
func (b *Backend) Step(slots []*loop.Slot, res []loop.StepResult) {
	// Read the clock only when some slot is paced: unpaced scripts run as
	// fast as the engine loop can, and the clock shows up in its profile.
	// An unpaced slot is always ready, so the step never waits then.
	var due, now time.Time
	unpaced := false
	for _, s := range slots {
		q := s.State.(*sequence)
		if !q.paced() {
			unpaced = true
			continue
		}
		if now.IsZero() {
			now = time.Now()
		}
		if q.readyAt.IsZero() {
			q.readyAt = now.Add(q.wait(q.pos))
		}
		if due.IsZero() || q.readyAt.Before(due) {
			due = q.readyAt
		}
	}
	if wait := due.Sub(now); !unpaced && wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-slots[0].Interrupt():
		}
		t.Stop()
		now = time.Now()
	}
	eos := []int32{b.eos}
	// Decide everything before changing anything: if a scripted panic fires
	// the runtime retries slot by slot, and no slot may have advanced twice.
	ready := make([]bool, len(slots))
	for i, s := range slots {
		q := s.State.(*sequence)
		if q.paced() && now.Before(q.readyAt) {
			continue
		}
		ready[i] = true
		switch {
		case q.pos == q.panicAt:
			panic(fmt.Sprintf("replay: scripted panic at iteration %d", q.pos))
		case q.pos == q.errorAt:
			res[i].Err = status.Errorf(status.Backend, "replay: scripted backend error at iteration %d", q.pos)
		case q.pos < len(q.script):
			res[i].Tokens = q.script[q.pos]
		default:
			res[i].Tokens = eos
		}
		if s.Request.Logprobs && res[i].Err == nil {
			res[i].Logprobs = certain(res[i].Tokens, s.Request.TopLogprobs > 0)
		}
	}
	for i, s := range slots {
		if ready[i] {
			q := s.State.(*sequence)
			q.pos++
			if q.paced() {
				q.readyAt = now.Add(q.wait(q.pos))
			}
		}
	}
}
