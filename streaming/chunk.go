package streaming

import (
	"encoding/json"
	"fmt"
)

// FinishReason says why a stream ended. The numeric values are part of the
// C ABI (LMS_FINISH_* in include/lmstream.h) and never change.
type FinishReason int32

const (
	NotFinished FinishReason = 0
	EndId       FinishReason = 1 // the end-of-sequence token was generated
	Length      FinishReason = 2 // max_tokens was reached
	Cancelled   FinishReason = 3 // the consumer cancelled or released the channel
	Error       FinishReason = 4 // the request failed; Chunk.ErrCode says how
	StopWords   FinishReason = 5 // a stop string or stop token id matched
)

var reasonNames = [...]string{"not_finished", "end_id", "length", "cancelled", "error", "stop_words"}

func (r FinishReason) String() string {
	if r >= 0 && int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return fmt.Sprintf("finish_reason(%d)", int32(r))
}

// ParseFinishReason is the inverse of String.
func ParseFinishReason(s string) (FinishReason, error) {
	for i, n := range reasonNames {
		if n == s {
			return FinishReason(i), nil
		}
	}
	return NotFinished, fmt.Errorf("unknown finish reason %q", s)
}

func (r FinishReason) MarshalJSON() ([]byte, error) { return json.Marshal(r.String()) }

func (r *FinishReason) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := ParseFinishReason(s)
	*r = v
	return err
}

// Usage is carried by the terminal chunk.
type Usage struct {
	PromptTokens    int     `json:"prompt_tokens"`
	CachedTokens    int     `json:"cached_tokens"` // prompt tokens found in a cache, not prefilled
	GeneratedTokens int     `json:"generated_tokens"`
	TTFTMs          float64 `json:"ttft_ms"` // submit to first generated token
	TPOTMs          float64 `json:"tpot_ms"` // mean time per output token after the first
	DraftProposed   int     `json:"draft_tokens_proposed"`
	DraftAccepted   int     `json:"draft_tokens_accepted"`
	VerifyPasses    int     `json:"verify_passes"`
}

// Chunk is one delta of a stream: the tokens accepted since the previous
// chunk and the text they completed. Text is always well-formed UTF-8.
type Chunk struct {
	TokenIDs   []int32      `json:"token_ids"`
	Text       string       `json:"text"`
	Finished   bool         `json:"finished"`
	Reason     FinishReason `json:"reason"`
	ErrCode    int32        `json:"error_code,omitempty"` // a status code of the C ABI, set when Reason is Error
	ErrMessage string       `json:"error_message,omitempty"`
	Usage      Usage        `json:"usage"`       // meaningful only on the terminal chunk
	BatchIndex int32        `json:"batch_index"` // which prompt of the request this stream is
	// Logprobs has one entry per token id when the request asked for
	// log-probabilities ("logprobs"), else none.
	Logprobs []TokenLogprob `json:"logprobs,omitempty"`
	// Reply is Text parsed into content, reasoning and tool calls, when
	// the request parses replies (a chat with tools, or a model that
	// thinks); nil otherwise.
	Reply *Reply `json:"reply,omitempty"`
}

// Logprob is a token with its log-probability (natural log) and its piece.
type Logprob struct {
	ID      int32   `json:"id"`
	Logprob float64 `json:"logprob"`
	// Bytes is the token's piece, as the vocabulary holds it: it may be
	// part of a character. Shared with the vocabulary; never modified.
	Bytes []byte `json:"bytes"`
}

// TokenLogprob is what a generated token's distribution said: the token's
// own log-probability and the most likely alternatives, most likely first
// (ties to the lower id), as many as the request's "top_logprobs".
type TokenLogprob struct {
	ID      int32     `json:"id"`
	Logprob float64   `json:"logprob"`
	Bytes   []byte    `json:"bytes"` // as Logprob.Bytes
	Top     []Logprob `json:"top_logprobs"`
}

// merge appends a later chunk onto c. Deltas concatenate, so merging queued
// chunks loses nothing; the later chunk's terminal fields win.
func (c *Chunk) merge(later *Chunk) {
	c.TokenIDs = append(c.TokenIDs, later.TokenIDs...)
	c.Logprobs = append(c.Logprobs, later.Logprobs...)
	c.Text += later.Text
	if later.Reply != nil {
		if c.Reply == nil {
			c.Reply = &Reply{}
		}
		c.Reply.Merge(later.Reply)
	}
	if later.Finished {
		c.Finished = true
		c.Reason = later.Reason
		c.ErrCode = later.ErrCode
		c.ErrMessage = later.ErrMessage
		c.Usage = later.Usage
	}
}

// Vocabulary maps token ids to the raw bytes of their pieces. Pieces need not
// be valid UTF-8 on their own: byte-fallback and byte-level BPE tokens often
// carry part of a character.
type Vocabulary interface {
	Size() int
	Piece(id int32) []byte
	IsSpecial(id int32) bool // control tokens whose text is dropped when skipping specials
}
