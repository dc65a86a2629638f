package tokenizer

import (
	"fmt"
	"strings"
	"sync"
)

// mergeRule is what the merge table says about one adjacent pair of ids:
// its priority (the line number in tokenizer.ggml.merges) and the id of the
// merged token.
type mergeRule struct {
	rank int32
	id   int32
}

func pairKey(left, right int32) uint64 { return uint64(uint32(left))<<32 | uint64(uint32(right)) }

func (t *Tokenizer) initBPE(cfg Config) error {
	pre, err := preTokenizerFor(cfg.Pre)
	if err != nil {
		return err
	}
	t.pre, t.wholeWord = pre, pre.ignoreMerges
	for b := range t.byteTok {
		t.byteTok[b] = -1
		if id, ok := t.textID[byteToUTF8[b]]; ok {
			t.byteTok[b] = id
		}
	}
	// The table is keyed by the pair of ids, not by strings, so the merge
	// loop does one integer-keyed lookup per candidate pair.
	t.merges = make(map[uint64]mergeRule, len(cfg.Merges))
	for rank, m := range cfg.Merges {
		// As llama.cpp reads a merge: split at the first space after the
		// first byte, so that a left token may itself start with a space.
		sp := -1
		if len(m) > 1 {
			if j := strings.IndexByte(m[1:], ' '); j >= 0 {
				sp = j + 1
			}
		}
		if sp < 0 || sp == len(m)-1 {
			return fmt.Errorf("tokenizer: tokenizer.ggml.merges[%d] %q is not two tokens separated by a space", rank, m)
		}
		a, b := m[:sp], m[sp+1:]
		left, ok1 := t.textID[a]
		right, ok2 := t.textID[b]
		merged, ok3 := t.textID[a+b]
		// A merge is a rule about vocabulary tokens; one that names a text
		// the vocabulary lacks is a broken file, refused rather than run
		// with the rule dropped or its result split into bytes.
		switch {
		case !ok1:
			return fmt.Errorf("tokenizer: tokenizer.ggml.merges[%d] %q: left token %q is not in the vocabulary (tokenizer.ggml.tokens)", rank, m, a)
		case !ok2:
			return fmt.Errorf("tokenizer: tokenizer.ggml.merges[%d] %q: right token %q is not in the vocabulary (tokenizer.ggml.tokens)", rank, m, b)
		case !ok3:
			return fmt.Errorf("tokenizer: tokenizer.ggml.merges[%d] %q: merged token %q is not in the vocabulary (tokenizer.ggml.tokens)", rank, m, a+b)
		}
		k := pairKey(left, right)
		if _, dup := t.merges[k]; !dup { // the earliest rank wins
			t.merges[k] = mergeRule{rank: int32(rank), id: merged}
		}
	}
	t.cache = newWordCache(wordCacheSize)
	return nil
}

// bpeWork is the scratch space of one Encode call, pooled because encoding is
// called per request and the buffers would otherwise be reallocated for
// every pre-token.
type bpeWork struct {
	spans  []span
	spans2 []span // scratch of multi-stage pre-tokenizers
	ids    []int32
	prev   []int32
	next   []int32
	heap   mergeHeap
	mapped []byte
}

var bpeWorkPool = sync.Pool{New: func() any { return new(bpeWork) }}

func (t *Tokenizer) encodeBPE(out []int32, s string) []int32 {
	w := bpeWorkPool.Get().(*bpeWork)
	w.spans, w.spans2 = t.pre.split(w.spans, w.spans2, s)
	for _, sp := range w.spans {
		out = t.encodeWord(out, s[sp.start:sp.end], w)
	}
	bpeWorkPool.Put(w)
	return out
}

// maxCachedWord bounds the pre-tokens worth caching: long ones (a run of CJK
// text, base64) rarely repeat and would crowd out the short common words.
const maxCachedWord = 64

func (t *Tokenizer) encodeWord(out []int32, word string, w *bpeWork) []int32 {
	if len(word) == 1 && t.byteTok[word[0]] >= 0 {
		return append(out, t.byteTok[word[0]])
	}
	cacheable := len(word) <= maxCachedWord
	if cacheable {
		if ids, ok := t.cache.get(word); ok {
			return append(out, ids...)
		}
	}
	if t.wholeWord {
		w.mapped = appendByteLevelEncoded(w.mapped[:0], word)
		if id, ok := t.textID[string(w.mapped)]; ok {
			return append(out, id)
		}
	}
	n0 := len(out)
	out = t.mergeWord(out, word, w)
	if cacheable {
		t.cache.put(word, out[n0:])
	}
	return out
}

// mergeWord applies the merges to one pre-token. Symbols form a doubly
// linked list over arrays; every adjacent pair that has a merge rule sits in
// a min-heap ordered by (rank, position). Popping the best pair, checking it
// is still current, merging, and pushing the two new neighbour pairs makes
// the loop O(n log n) instead of rescanning the word after every merge.
// Ties in rank (the same pair occurring twice) go to the leftmost, which
// gives the same result as GPT-2's merge-all-occurrences-left-to-right.
func (t *Tokenizer) mergeWord(out []int32, word string, w *bpeWork) []int32 {
	n := len(word)
	w.ids = growInt32(w.ids, n)
	w.prev = growInt32(w.prev, n)
	w.next = growInt32(w.next, n)
	ids, prev, next := w.ids, w.prev, w.next
	for i := 0; i < n; i++ {
		ids[i] = t.byteTok[word[i]]
		prev[i] = int32(i - 1)
		next[i] = int32(i + 1)
	}
	next[n-1] = -1
	h := w.heap[:0]
	for i := 0; i+1 < n; i++ {
		if r, ok := t.merges[pairKey(ids[i], ids[i+1])]; ok && ids[i] >= 0 && ids[i+1] >= 0 {
			h.push(mergeCand{rank: r.rank, pos: int32(i), right: int32(i + 1), left: ids[i], rightID: ids[i+1], id: r.id})
		}
	}
	for len(h) > 0 {
		c := h.pop()
		// Stale if either side has since been merged: a merged symbol gets a
		// new id and a removed one is unlinked.
		if ids[c.pos] != c.left || next[c.pos] != c.right || ids[c.right] != c.rightID {
			continue
		}
		ids[c.pos] = c.id
		nr := next[c.right]
		next[c.pos] = nr
		if nr >= 0 {
			prev[nr] = c.pos
		}
		ids[c.right] = -2 // unlinked
		if p := prev[c.pos]; p >= 0 {
			if r, ok := t.merges[pairKey(ids[p], c.id)]; ok && ids[p] >= 0 {
				h.push(mergeCand{rank: r.rank, pos: p, right: c.pos, left: ids[p], rightID: c.id, id: r.id})
			}
		}
		if nr >= 0 {
			if r, ok := t.merges[pairKey(c.id, ids[nr])]; ok && ids[nr] >= 0 {
				h.push(mergeCand{rank: r.rank, pos: c.pos, right: nr, left: c.id, rightID: ids[nr], id: r.id})
			}
		}
	}
	w.heap = h
	for i := int32(0); i >= 0; i = next[i] {
		switch id := ids[i]; {
		case id >= 0:
			out = append(out, id)
		case t.unk >= 0:
			// A byte with no token of its own: only possible with a
			// vocabulary missing part of the 256-symbol alphabet.
			out = append(out, t.unk)
		}
	}
	return out
}

func growInt32(s []int32, n int) []int32 {
	if cap(s) < n {
		return make([]int32, n, n+n/2)
	}
	return s[:n]
}

type mergeCand struct {
	rank, pos, right int32
	left, rightID    int32 // the ids the pair had when pushed, to detect staleness
	id               int32 // the merged id
}

// mergeHeap is a binary min-heap by (rank, pos), hand-rolled because
// container/heap's interface calls cost more than the merges themselves.
type mergeHeap []mergeCand

func (a mergeCand) less(b mergeCand) bool {
	return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos)
}

func (h *mergeHeap) push(c mergeCand) {
	s := append(*h, c)
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !s[i].less(s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
	*h = s
}

func (h *mergeHeap) pop() mergeCand {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for i := 0; ; {
		l := 2*i + 1
		if l >= len(s) {
			break
		}
		m := l
		if r := l + 1; r < len(s) && s[r].less(s[l]) {
			m = r
		}
		if !s[m].less(s[i]) {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}

// wordCacheSize bounds each of the cache's two generations.
const wordCacheSize = 1 << 14

// wordCache remembers the ids of recently encoded pre-tokens; natural text
// repeats a small set of words, and a hit skips the merge loop entirely.
// It keeps two generations: when the current one fills, it becomes the old
// one and the previous old one is dropped, and a hit in the old generation is
// copied forward. That bounds memory to 2×size entries and approximates LRU
// without per-entry bookkeeping.
type wordCache struct {
	mu        sync.Mutex
	size      int
	cur, prev map[string][]int32
}

func newWordCache(size int) *wordCache {
	return &wordCache{size: size, cur: make(map[string][]int32)}
}

func (c *wordCache) get(word string) ([]int32, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ids, ok := c.cur[word]; ok {
		return ids, true
	}
	if ids, ok := c.prev[word]; ok {
		c.putLocked(word, ids)
		return ids, true
	}
	return nil, false
}

func (c *wordCache) put(word string, ids []int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(word, append([]int32(nil), ids...))
}

func (c *wordCache) putLocked(word string, ids []int32) {
	if len(c.cur) >= c.size {
		c.prev, c.cur = c.cur, make(map[string][]int32, c.size)
	}
	// Clone: word is a substring of the caller's text, which the cache must
	// not keep alive.
	c.cur[strings.Clone(word)] = ids
}
