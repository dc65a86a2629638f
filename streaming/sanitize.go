package streaming

import "encoding/binary"

// replacement is U+FFFD REPLACEMENT CHARACTER encoded as UTF-8.
const replacement = "\uFFFD"

// leadInfo classifies every possible first byte of a UTF-8 sequence, following
// the Unicode table of well-formed byte sequences (Table 3-7). The low three
// bits hold the sequence length (0: the byte can never start a sequence, so it
// is an invalid subpart on its own); the high nibble indexes secondRange,
// which carries the allowed range of the second byte. Restricting the second
// byte is what rejects overlongs (E0 80..9F, F0 80..8F), surrogates
// (ED A0..BF) and code points above U+10FFFF (F4 90..BF) at the earliest byte
// that proves them wrong, which is exactly where the maximal-subpart rule
// places the cut.
var leadInfo = func() (t [256]uint8) {
	// 80..C1 and F5..FF stay 0: continuation bytes without a leader, the
	// always-overlong C0/C1, and leaders of code points above U+10FFFF.
	for b := 0x00; b <= 0x7F; b++ {
		t[b] = 1
	}
	for b := 0xC2; b <= 0xDF; b++ {
		t[b] = 2 | rangeCont<<4
	}
	t[0xE0] = 3 | rangeE0<<4
	for b := 0xE1; b <= 0xEF; b++ {
		t[b] = 3 | rangeCont<<4
	}
	t[0xED] = 3 | rangeED<<4
	t[0xF0] = 4 | rangeF0<<4
	for b := 0xF1; b <= 0xF3; b++ {
		t[b] = 4 | rangeCont<<4
	}
	t[0xF4] = 4 | rangeF4<<4
	return t
}()

const (
	rangeCont = iota // 80..BF
	rangeE0          // A0..BF: shorter forms would be overlong
	rangeED          // 80..9F: A0..BF would encode a surrogate
	rangeF0          // 90..BF: shorter forms would be overlong
	rangeF4          // 80..8F: 90..BF would exceed U+10FFFF
)

// secondRange is indexed by the high nibble of leadInfo; it has 16 entries
// so that the index needs no bounds check.
var secondRange = [16]struct{ lo, hi byte }{
	rangeCont: {0x80, 0xBF},
	rangeE0:   {0xA0, 0xBF},
	rangeED:   {0x80, 0x9F},
	rangeF0:   {0x90, 0xBF},
	rangeF4:   {0x80, 0x8F},
}

// dfaBlock is the number of bytes the DFA fast path validates at once.
const dfaBlock = 32

// The states of the validating DFA. Each is a bit offset into a dfaRow entry,
// so a transition is state = dfaRow[b] >> state: the table load depends only
// on the byte, and just a shift sits on the loop-carried dependency chain.
// The DFA only decides whether a block is well-formed; the general path in
// Write places the U+FFFD replacements when it is not.
const (
	dfaAccept  = 0 * 6 // between characters
	dfaError   = 1 * 6 // absorbing
	dfaNeed1   = 2 * 6 // one continuation byte (80..BF) to go
	dfaNeed2   = 3 * 6 // two to go
	dfaNeed3   = 4 * 6 // three to go
	dfaAfterE0 = 5 * 6 // then A0..BF and one more
	dfaAfterED = 6 * 6 // then 80..9F and one more
	dfaAfterF0 = 7 * 6 // then 90..BF and two more
	dfaAfterF4 = 8 * 6 // then 80..8F and two more
)

// dfaRow[b] packs, for every state s, the state reached from s on byte b,
// in the six bits at offset s. It is derived from Table 3-7 like leadInfo.
var dfaRow = func() (t [256]uint64) {
	in := func(b, lo, hi int) bool { return b >= lo && b <= hi }
	for b := 0; b < 256; b++ {
		next := func(s int) int {
			switch s {
			case dfaAccept:
				switch {
				case b <= 0x7F:
					return dfaAccept
				case in(b, 0xC2, 0xDF):
					return dfaNeed1
				case b == 0xE0:
					return dfaAfterE0
				case b == 0xED:
					return dfaAfterED
				case in(b, 0xE1, 0xEF):
					return dfaNeed2
				case b == 0xF0:
					return dfaAfterF0
				case b == 0xF4:
					return dfaAfterF4
				case in(b, 0xF1, 0xF3):
					return dfaNeed3
				}
			case dfaNeed1:
				if in(b, 0x80, 0xBF) {
					return dfaAccept
				}
			case dfaNeed2:
				if in(b, 0x80, 0xBF) {
					return dfaNeed1
				}
			case dfaNeed3:
				if in(b, 0x80, 0xBF) {
					return dfaNeed2
				}
			case dfaAfterE0:
				if in(b, 0xA0, 0xBF) {
					return dfaNeed1
				}
			case dfaAfterED:
				if in(b, 0x80, 0x9F) {
					return dfaNeed1
				}
			case dfaAfterF0:
				if in(b, 0x90, 0xBF) {
					return dfaNeed2
				}
			case dfaAfterF4:
				if in(b, 0x80, 0x8F) {
					return dfaNeed2
				}
			}
			return dfaError
		}
		for s := dfaAccept; s <= dfaAfterF4; s += 6 {
			t[b] |= uint64(next(s)) << s
		}
	}
	return t
}()

// isCont reports whether b is a continuation byte (10xxxxxx).
func isCont(b byte) bool { return b&0xC0 == 0x80 }

// Sanitizer turns a stream of raw bytes, arriving in arbitrary pieces, into
// well-formed UTF-8.
//
// Token pieces from byte-level BPE and byte-fallback vocabularies routinely
// split a character across tokens, so a piece cannot be decoded on its own.
// The Sanitizer holds back an incomplete trailing sequence for as long as it
// may still complete, and replaces bytes with U+FFFD as soon as they are
// known to be invalid. Its output for any split of the input equals Python's
// bytes.decode("utf-8", "replace") of the whole input (one U+FFFD per maximal
// invalid subpart), which is what invariant I2 of the stream contract
// promises every binding.
//
// The zero value is ready to use. The state is a few bytes held inline, so a
// Sanitizer never touches the heap itself.
type Sanitizer struct {
	buf [4]byte // held bytes of an incomplete sequence: a leader and the valid continuations seen so far
	n   uint8   // number of bytes held in buf (0..3)
}

// Write appends to dst the text that p completes and returns the extended
// slice. An incomplete trailing sequence that may still complete is held
// back; invalid bytes become U+FFFD as soon as they are known to be invalid.
func (s *Sanitizer) Write(dst, p []byte) []byte {
	i := 0
	if s.n > 0 {
		dst, i = s.resume(dst, p)
		if s.n > 0 {
			return dst // p ended before the held sequence was decided
		}
	}
	// Valid bytes are not appended one by one: start marks the beginning of
	// the current run of well-formed text, which is copied into dst in one
	// append when the run ends (an invalid subpart, a held tail, or the end).
	start := i
	n := len(p)
	slowEnd := 0 // below this index, known to hold an invalid sequence: take the general path
	for i < n {
		if i >= slowEnd && i+dfaBlock <= n {
			// Fast path: eight ASCII bytes at a time. Generated text is
			// mostly ASCII, and even CJK text has runs of it.
			if binary.LittleEndian.Uint64(p[i:])&0x8080808080808080 == 0 {
				i += 8
				continue
			}
			// Fast path for multibyte text: validate a block with the
			// shift DFA (see dfaRow), which costs a shift per byte on the
			// dependency chain instead of a load per character.
			st := uint64(dfaAccept)
			for _, c := range p[i : i+dfaBlock : i+dfaBlock] {
				st = dfaRow[c] >> (st & 63)
			}
			switch st & 63 {
			case dfaAccept:
				i += dfaBlock
			case dfaError:
				// Somewhere in the block is an invalid subpart: decide
				// the block one sequence at a time.
				slowEnd = i + dfaBlock
			default:
				// Valid, but the block ends inside a character: resume at
				// that character's first byte.
				j := i + dfaBlock - 1
				for isCont(p[j]) {
					j--
				}
				i = j
			}
			continue
		}
		// General path: one sequence that is invalid or near the end of p.
		b := p[i]
		if b < 0x80 {
			i++
			continue
		}
		info := leadInfo[b]
		size := int(info & 7)
		if size == 0 {
			dst = append(dst, p[start:i]...)
			dst = append(dst, replacement...)
			i++
			start = i
			continue
		}
		r := secondRange[info>>4]
		if i+size <= n {
			// The whole sequence is inside p: decide it with straight-line
			// checks. k counts the leading bytes that are valid so far; a
			// sequence that turns invalid after k bytes is one maximal
			// subpart of length k, and the byte that broke it is examined
			// again as a fresh start.
			k := 1
			if c := p[i+1]; c >= r.lo && c <= r.hi {
				k = 2
				if size > 2 && isCont(p[i+2]) {
					k = 3
					if size > 3 && isCont(p[i+3]) {
						k = 4
					}
				}
			}
			if k == size {
				i += size
				continue
			}
			dst = append(dst, p[start:i]...)
			dst = append(dst, replacement...)
			i += k
			start = i
			continue
		}
		// The sequence runs past the end of p. Check what is there; if it is
		// valid so far it may still complete, so hold it for the next Write.
		k := 1
		for i+k < n {
			c := p[i+k]
			if k == 1 && (c < r.lo || c > r.hi) || k > 1 && !isCont(c) {
				break
			}
			k++
		}
		dst = append(dst, p[start:i]...)
		if i+k < n {
			dst = append(dst, replacement...)
			i += k
			start = i
			continue
		}
		s.n = uint8(copy(s.buf[:], p[i:]))
		return dst
	}
	return append(dst, p[start:]...)
}

// resume continues a held sequence with the first bytes of p. It returns the
// index of the first byte of p not consumed; s.n stays non-zero when p ran
// out before the sequence completed or failed.
func (s *Sanitizer) resume(dst, p []byte) ([]byte, int) {
	info := leadInfo[s.buf[0]]
	size := int(info & 7)
	r := secondRange[info>>4]
	for j, c := range p {
		k := int(s.n) // position of c inside the sequence
		if k == 1 && (c < r.lo || c > r.hi) || k > 1 && !isCont(c) {
			// The held prefix is a maximal invalid subpart; c starts afresh.
			s.n = 0
			return append(dst, replacement...), j
		}
		s.buf[k] = c
		s.n++
		if int(s.n) == size {
			s.n = 0
			return append(dst, s.buf[:size]...), j + 1
		}
	}
	return dst, len(p)
}

// Flush appends the replacement for any held bytes and resets the state. The
// held bytes are always a valid-so-far prefix of one sequence, hence one
// maximal subpart and one U+FFFD, as Python does at the end of its input.
func (s *Sanitizer) Flush(dst []byte) []byte {
	if s.n > 0 {
		dst = append(dst, replacement...)
		s.n = 0
	}
	return dst
}

// Held returns the number of bytes held back, waiting for the rest of a
// sequence.
func (s *Sanitizer) Held() int { return int(s.n) }

// Reset drops any held bytes without emitting them, for reuse on a new
// stream.
func (s *Sanitizer) Reset() { s.n = 0 }
