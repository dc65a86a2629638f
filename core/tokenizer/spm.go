package tokenizer

import (
	"strings"
	"sync"
	"unicode/utf8"
)

func (t *Tokenizer) initSPM() {
	// Only normal and user-defined tokens may be produced by merging text:
	// "<s>" (control) or "<0x41>" (byte) spelled out in the input must stay
	// ordinary characters, as in SentencePiece.
	t.spmPieces = make(map[string]int32, len(t.tokens))
	for i, s := range t.tokens {
		switch t.types[i] {
		case TypeNormal, TypeUserDefined, TypeUndefined:
			if _, dup := t.spmPieces[s]; !dup && s != "" {
				t.spmPieces[s] = int32(i)
			}
		}
	}
	for b := range t.spmByteToks {
		t.spmByteToks[b] = -1
	}
	for i, s := range t.tokens {
		if b, ok := parseByteToken(s); ok && t.types[i] == TypeByte && t.spmByteToks[b] < 0 {
			t.spmByteToks[b] = int32(i)
		}
	}
}

type spmSym struct {
	start, end int32 // byte range in the escaped text
	prev, next int32
}

type spmCand struct {
	score       float32
	left, right int32
	size        int32 // byte length of the merged text, to detect staleness
	id          int32
}

// before orders the queue: highest score first, leftmost on ties.
func (a spmCand) before(b spmCand) bool {
	return a.score > b.score || (a.score == b.score && a.left < b.left)
}

type spmWork struct {
	text []byte
	syms []spmSym
	heap []spmCand
}

var spmWorkPool = sync.Pool{New: func() any { return new(spmWork) }}

// encodeSPM runs SentencePiece's BPE: start from single characters and keep
// merging the adjacent pair whose concatenation is the highest-scoring
// vocabulary piece. A priority queue with lazy invalidation makes it
// O(n log n) over the fragment.
func (t *Tokenizer) encodeSPM(out []int32, s string, spacePrefix bool) []int32 {
	w := spmWorkPool.Get().(*spmWork)
	defer spmWorkPool.Put(w)
	text := w.text[:0]
	if spacePrefix {
		text = append(text, "▁"...)
	}
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' {
			text = append(text, "▁"...)
		} else {
			text = append(text, s[i])
		}
	}
	w.text = text
	if len(text) == 0 {
		return out
	}
	syms := w.syms[:0]
	for i := 0; i < len(text); {
		_, n := utf8.DecodeRune(text[i:])
		syms = append(syms, spmSym{start: int32(i), end: int32(i + n), prev: int32(len(syms) - 1), next: int32(len(syms) + 1)})
		i += n
	}
	syms[len(syms)-1].next = -1
	w.syms = syms
	h := w.heap[:0]
	for i := 0; i+1 < len(syms); i++ {
		h = t.spmPush(h, text, syms, int32(i), int32(i+1))
	}
	for len(h) > 0 {
		var c spmCand
		c, h = spmPop(h)
		l, r := &syms[c.left], &syms[c.right]
		if l.end == l.start || r.end == r.start || l.next != c.right || r.end-l.start != c.size {
			continue // a side has been merged into something else since
		}
		l.end = r.end
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = c.left
		}
		r.start, r.end = 0, 0 // unlinked
		if l.prev >= 0 {
			h = t.spmPush(h, text, syms, l.prev, c.left)
		}
		if l.next >= 0 {
			h = t.spmPush(h, text, syms, c.left, l.next)
		}
	}
	w.heap = h
	for i := int32(0); i >= 0; i = syms[i].next {
		piece := text[syms[i].start:syms[i].end]
		if id, ok := t.spmPieces[string(piece)]; ok {
			out = append(out, id)
			continue
		}
		out = t.spmFallback(out, piece)
	}
	return out
}

func (t *Tokenizer) spmPush(h []spmCand, text []byte, syms []spmSym, left, right int32) []spmCand {
	start, end := syms[left].start, syms[right].end
	id, ok := t.spmPieces[string(text[start:end])]
	if !ok {
		return h
	}
	c := spmCand{score: t.scores[id], left: left, right: right, size: end - start, id: id}
	h = append(h, c)
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h[i].before(h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	return h
}

func spmPop(h []spmCand) (spmCand, []spmCand) {
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		l := 2*i + 1
		if l >= len(h) {
			break
		}
		m := l
		if r := l + 1; r < len(h) && h[r].before(h[l]) {
			m = r
		}
		if !h[m].before(h[i]) {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	return top, h
}

// spmFallback encodes a character the vocabulary lacks as one <0xNN> token
// per UTF-8 byte, or as a single UNK when the vocabulary has no byte tokens.
func (t *Tokenizer) spmFallback(out []int32, piece []byte) []int32 {
	for _, b := range piece {
		if t.spmByteToks[b] < 0 {
			if t.unk >= 0 {
				out = append(out, t.unk)
			}
			return out
		}
	}
	for _, b := range piece {
		out = append(out, t.spmByteToks[b])
	}
	return out
}

// spmUnescape is the inverse of the space escaping, for pieces.
func spmUnescape(s string) string { return strings.ReplaceAll(s, "▁", " ") }
