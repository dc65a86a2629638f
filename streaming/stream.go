package streaming

// Stream is the producer-side state of one batch item of one request: it
// decodes the tokens the engine accepts into text, applies the stop strings,
// gates chunks by the stream interval, latches the finish reason and pushes
// chunks into the item's Sink.
//
// A Stream with no Sink collects the whole answer instead; it runs the very
// same stages, so a request nobody streams behaves exactly like one that is.
//
// A Stream belongs to the engine goroutine; it is not safe for concurrent use.
type Stream struct {
	sink        *Sink
	vocab       Vocabulary
	interval    int
	skipSpecial bool

	san  Sanitizer
	stop *StopMatcher // nil when the request has no stop strings
	// reply parses the released text (nil: the request does not ask).
	reply ReplyParser

	ids  []int32        // accepted since the last chunk
	lps  []TokenLogprob // their logprobs, when the engine gives them
	text []byte         // released since the last chunk
	buf  []byte         // sanitizer output before stop matching

	generated int
	finished  bool
	reason    FinishReason
	errCode   int32
	errMsg    string
	closed    bool

	// Collected answer when nobody is attached.
	allIDs   []int32
	allLps   []TokenLogprob
	allText  []byte
	allReply *Reply
	allUsage Usage
}

// codeInternal is status.Internal of the C ABI (LMS_ERR_INTERNAL).
const codeInternal = -11

// NewStream makes the state of one batch item. sink may be nil.
func NewStream(sink *Sink, vocab Vocabulary, stops []string, includeStop bool) *Stream {
	s := &Stream{sink: sink, vocab: vocab, interval: 1, skipSpecial: true}
	if sink != nil {
		s.interval, s.skipSpecial = sink.Settings()
	}
	for _, st := range stops {
		if st != "" {
			s.stop = NewStopMatcher(stops, includeStop)
			break
		}
	}
	return s
}

// ParseReply has the stream parse its text with p (before any token is
// accepted): every chunk then carries Reply.
func (s *Stream) ParseReply(p ReplyParser) { s.reply = p }

// Generated is the number of tokens accepted so far.
func (s *Stream) Generated() int { return s.generated }

// Finished reports whether the finish reason is latched.
func (s *Stream) Finished() bool { return s.finished }

// Reason is the latched finish reason (NotFinished until then).
func (s *Stream) Reason() FinishReason { return s.reason }

// Cancelled reports whether the consumer cancelled or went away.
func (s *Stream) Cancelled() bool { return s.sink != nil && s.sink.Cancelled() }

// Paused reports whether the consumer asked the engine to wait for it.
func (s *Stream) Paused() bool { return s.sink != nil && s.sink.Paused() }

// Accept decodes the tokens the engine accepted for this item in one
// iteration. When endsWithStopToken is set, the last token is an end token
// (EOS or a stop token id): its id is kept, its text never reaches the
// consumer. Accept returns how many tokens it took: fewer than len(tokens)
// when a stop string completed, in which case the stream is finished with
// StopWords and the rest of the burst is discarded.
func (s *Stream) Accept(tokens []int32, endsWithStopToken bool) int {
	return s.AcceptLogprobs(tokens, nil, endsWithStopToken)
}

// AcceptLogprobs is Accept with each token's logprobs (lps[i] for
// tokens[i]; nil: none), which travel with the token ids: the tokens a
// stop string discards take theirs along. The entries are copied, and the
// pieces filled in from the vocabulary.
func (s *Stream) AcceptLogprobs(tokens []int32, lps []TokenLogprob, endsWithStopToken bool) int {
	if s.finished {
		return 0
	}
	for i, id := range tokens {
		s.ids = append(s.ids, id)
		if lps != nil {
			s.lps = append(s.lps, s.ownLogprob(lps[i]))
		}
		s.generated++
		if endsWithStopToken && i == len(tokens)-1 {
			break
		}
		if s.skipSpecial && s.vocab.IsSpecial(id) {
			if s.reply != nil && s.reply.Wants(s.vocab.Piece(id)) {
				// Held stop-string text, if any, reaches the parser
				// after this marker: stop strings that end in text
				// before a marker are for the caller to avoid.
				s.reply.Write(s.vocab.Piece(id))
			}
			continue
		}
		s.buf = s.san.Write(s.buf[:0], s.vocab.Piece(id))
		if s.release(s.buf) {
			s.finish(StopWords, 0, "")
			return i + 1
		}
	}
	return len(tokens)
}

// ownLogprob copies an engine's entry (whose buffers it reuses) with the
// pieces of its tokens.
func (s *Stream) ownLogprob(lp TokenLogprob) TokenLogprob {
	lp.Bytes = s.vocab.Piece(lp.ID)
	top := make([]Logprob, len(lp.Top))
	for i, t := range lp.Top {
		t.Bytes = s.vocab.Piece(t.ID)
		top[i] = t
	}
	lp.Top = top
	return lp
}

// release runs sanitized text through the stop matcher into the pending
// text, reporting whether a stop string completed.
func (s *Stream) release(text []byte) bool {
	if len(text) == 0 {
		return false
	}
	n := len(s.text)
	matched := false
	if s.stop == nil {
		s.text = append(s.text, text...)
	} else {
		s.text, matched = s.stop.Push(s.text, text)
	}
	if s.reply != nil {
		s.reply.Write(s.text[n:])
	}
	return matched
}

// Finish latches the finish reason. The first reason wins: a stop match
// found while decoding comes before the runtime's end-token and length
// checks of the same iteration, and nothing overrides Cancelled or Error.
func (s *Stream) Finish(reason FinishReason, errCode int32, errMsg string) {
	s.finish(reason, errCode, errMsg)
}

func (s *Stream) finish(reason FinishReason, errCode int32, errMsg string) {
	if s.finished {
		return
	}
	s.finished, s.reason, s.errCode, s.errMsg = true, reason, errCode, errMsg
}

// Emit pushes a non-terminal chunk when at least interval tokens are pending.
// It reports false when the consumer has released the channel.
func (s *Stream) Emit() bool {
	if s.finished || len(s.ids) < s.interval || s.sink == nil {
		if s.sink == nil {
			s.collect(false)
		}
		return true
	}
	return s.sink.Push(s.take(false))
}

// take moves the pending delta into a chunk; final: the answer has ended.
func (s *Stream) take(final bool) Chunk {
	ch := Chunk{TokenIDs: s.ids, Text: string(s.text), Logprobs: s.lps, Reply: s.takeReply(final)}
	s.ids, s.text, s.lps = nil, s.text[:0], nil
	return ch
}

func (s *Stream) takeReply(final bool) *Reply {
	if s.reply == nil {
		return nil
	}
	r := s.reply.Take(final)
	return &r
}

func (s *Stream) collect(final bool) {
	s.allIDs = append(s.allIDs, s.ids...)
	s.allLps = append(s.allLps, s.lps...)
	s.allText = append(s.allText, s.text...)
	if r := s.takeReply(final); r != nil {
		if s.allReply == nil {
			s.allReply = &Reply{}
		}
		s.allReply.Merge(r)
	}
	s.ids, s.text, s.lps = s.ids[:0], s.text[:0], s.lps[:0]
}

// Close flushes what is held back and pushes the terminal chunk with the
// latched reason (Error with a message when none was latched: every path
// must have said why it ended). Close runs once; later calls do nothing.
func (s *Stream) Close(usage Usage) {
	if s.closed {
		return
	}
	s.closed = true
	if !s.finished {
		s.finish(Error, codeInternal, "stream closed without a finish reason")
	}
	// Bytes held for an incomplete character are final now; they pass the
	// stop matcher like any other text (a stop can still complete here).
	s.buf = s.san.Flush(s.buf[:0])
	if s.release(s.buf) && (s.reason == EndId || s.reason == Length) {
		s.reason = StopWords
	}
	if s.stop != nil {
		if _, matched := s.stop.Matched(); !matched {
			s.text = s.stop.Flush(s.text)
		}
	}
	usage.GeneratedTokens = s.generated
	if s.sink == nil {
		s.collect(true)
		s.allUsage = usage
		return
	}
	ch := s.take(true)
	ch.Finished, ch.Reason, ch.ErrCode, ch.ErrMessage, ch.Usage = true, s.reason, s.errCode, s.errMsg, usage
	s.sink.Push(ch)
}

// Result is the collected answer of a stream with no Sink, valid after Close.
func (s *Stream) Result() Chunk {
	return Chunk{
		TokenIDs: s.allIDs, Text: string(s.allText), Logprobs: s.allLps, Reply: s.allReply,
		Finished: true, Reason: s.reason, ErrCode: s.errCode, ErrMessage: s.errMsg,
		Usage: s.allUsage,
	}
}
