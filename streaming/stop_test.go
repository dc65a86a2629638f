package streaming

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// pushStep is one Push and what it must do.
type pushStep struct {
	text    string
	out     string // released by this push
	held    int    // Held() afterwards
	matched bool
}

func TestStopMatcherTable(t *testing.T) {
	tests := []struct {
		name    string
		stops   []string
		include bool
		steps   []pushStep
		flush   string // released by Flush at the end
		stop    string // Matched(), "" for none
	}{
		{
			name:  "stop split across 3 pushes",
			stops: []string{"</s>"},
			steps: []pushStep{
				{text: "hello <", out: "hello ", held: 1},
				{text: "/s", out: "", held: 3},
				{text: "> tail", out: "", matched: true},
			},
			stop: "</s>",
		},
		{
			name:  "CJK stop pushed char by char",
			stops: []string{"中文"},
			steps: []pushStep{
				{text: "a", out: "a"},
				{text: "中", out: "", held: 3},
				{text: "文", out: "", matched: true},
			},
			stop: "中文",
		},
		{
			name:  "CJK stop broken off",
			stops: []string{"中文"},
			steps: []pushStep{
				{text: "中", out: "", held: 3},
				{text: "中", out: "中", held: 3},
				{text: "x", out: "中x"},
			},
			flush: "",
		},
		{
			name:  "a中 with stop xy holds nothing",
			stops: []string{"xy"},
			steps: []pushStep{
				{text: "a中", out: "a中"},
			},
		},
		{
			name:  "a中 with stop 中x holds the whole character",
			stops: []string{"中x"},
			steps: []pushStep{
				{text: "a中", out: "a", held: 3},
				{text: "y", out: "中y"},
			},
		},
		{
			name:  "### vs ##x",
			stops: []string{"###"},
			steps: []pushStep{
				{text: "##", out: "", held: 2},
				{text: "x", out: "##x"},
			},
		},
		{
			name:  "prefix stops: newline matches first",
			stops: []string{"\n\nUser:", "\n"},
			steps: []pushStep{
				{text: "answer", out: "answer"},
				{text: "\n", out: "", matched: true},
				{text: "\nUser:", out: "", matched: true},
			},
			stop: "\n",
		},
		{
			name:  "partial stop at end flushed",
			stops: []string{"\n\nUser:"},
			steps: []pushStep{
				{text: "done.\n\nUs", out: "done.", held: 4},
			},
			flush: "\n\nUs",
		},
		{
			name:    "include stop",
			stops:   []string{"</s>"},
			include: true,
			steps: []pushStep{
				{text: "end</", out: "end", held: 2},
				{text: "s>ignored", out: "</s>", matched: true},
			},
			stop: "</s>",
		},
		{
			name:  "stop inside one push cuts mid-text",
			stops: []string{"STOP"},
			steps: []pushStep{
				{text: "keep this STOP drop this", out: "keep this ", matched: true},
			},
			stop: "STOP",
		},
		{
			name:  "earliest end wins over earlier start",
			stops: []string{"abcd", "bc"},
			steps: []pushStep{
				{text: "xab", out: "x", held: 2},
				{text: "cd", out: "a", matched: true},
			},
			stop: "bc",
		},
		{
			name:  "tie at same end: longer stop wins",
			stops: []string{"c", "abc"},
			steps: []pushStep{
				{text: "zzab", out: "zz", held: 2},
				{text: "c", out: "", matched: true},
			},
			stop: "abc",
		},
		{
			name:  "hold shrinks to a shorter prefix via failure link",
			stops: []string{"aab"},
			steps: []pushStep{
				{text: "aa", out: "", held: 2},
				{text: "a", out: "a", held: 2},
				{text: "b", out: "", matched: true},
			},
			stop: "aab",
		},
		{
			name:  "empty and duplicate stops",
			stops: []string{"", "##", "##"},
			steps: []pushStep{
				{text: "a#", out: "a", held: 1},
				{text: "#b", out: "", matched: true},
			},
			stop: "##",
		},
		{
			name:  "no stops: pass-through",
			stops: []string{""},
			steps: []pushStep{
				{text: "anything ###", out: "anything ###"},
			},
		},
		{
			name:  "emoji stop",
			stops: []string{"😀!"},
			steps: []pushStep{
				{text: "hi 😀", out: "hi ", held: 4},
				{text: "😀", out: "😀", held: 4},
				{text: "!", out: "", matched: true},
			},
			stop: "😀!",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := NewStopMatcher(tc.stops, tc.include)
			var all []byte
			for i, st := range tc.steps {
				before := len(all)
				var matched bool
				all, matched = m.Push(all, []byte(st.text))
				require.Equal(t, st.out, string(all[before:]), "released by push %d", i)
				require.Equal(t, st.matched, matched, "matched after push %d", i)
				require.Equal(t, st.held, m.Held(), "held after push %d", i)
			}
			before := len(all)
			all = m.Flush(all)
			require.Equal(t, tc.flush, string(all[before:]), "flush")
			stop, ok := m.Matched()
			require.Equal(t, tc.stop != "", ok)
			require.Equal(t, tc.stop, stop)
		})
	}
}

func TestStopMatcherReset(t *testing.T) {
	m := NewStopMatcher([]string{"##"}, false)
	out, matched := m.Push(nil, []byte("a##b"))
	require.True(t, matched)
	require.Equal(t, "a", string(out))
	out, matched = m.Push(out, []byte("more"))
	require.True(t, matched)
	require.Equal(t, "a", string(out), "a done matcher releases nothing")
	m.Reset()
	_, ok := m.Matched()
	require.False(t, ok)
	out, matched = m.Push(nil, []byte("c#"))
	require.False(t, matched)
	require.Equal(t, "c", string(out))
	require.Equal(t, 1, m.Held())
	m.Reset()
	require.Zero(t, m.Held())
	require.Equal(t, "", string(m.Flush(nil)))
}

func TestStopMatcherInvalidStopIsDecoded(t *testing.T) {
	// A stop with invalid bytes is matched as its sanitized form, so it can
	// never cut a character in half.
	m := NewStopMatcher([]string{"\xB8\xAD", "x\xFF"}, false)
	out, matched := m.Push(nil, []byte("中"))
	require.False(t, matched)
	require.Equal(t, "中", string(out))
	out, matched = m.Push(out, []byte("x\uFFFDy"))
	require.True(t, matched)
	require.Equal(t, "中", string(out))
	stop, _ := m.Matched()
	require.Equal(t, "x\xFF", stop, "Matched reports the stop as given")
}

func TestStopMatcherNoAllocs(t *testing.T) {
	m := NewStopMatcher([]string{"\n\nUser:", "###", "</s>", "中文"}, false)
	text := []byte(strings.Repeat("some text ## and </ and \n\nUse 中 文 ", 20))
	dst := make([]byte, 0, 2*len(text))
	allocs := testing.AllocsPerRun(100, func() {
		m.Reset()
		out := dst[:0]
		for i := 0; i < len(text); {
			_, n := utf8.DecodeRune(text[i:])
			out, _ = m.Push(out, text[i:i+n])
			i += n
		}
		out, _ = m.Push(out, text) // one bulk push too
		_ = m.Flush(out)
	})
	require.Zero(t, allocs)
}

// stopOracle cuts text at the earliest-ending occurrence of any stop
// (longest stop on a tie), by brute force over end positions.
func stopOracle(text string, stops []string, include bool) (string, bool) {
	for end := 1; end <= len(text); end++ {
		best := ""
		for _, s := range stops {
			if s != "" && strings.HasSuffix(text[:end], s) && len(s) > len(best) {
				best = s
			}
		}
		if best != "" {
			if include {
				return text[:end], true
			}
			return text[:end-len(best)], true
		}
	}
	return text, false
}

// holdOracle is the minimal hold of I5 after text (which contains no match):
// the longest suffix that is a proper prefix of some stop, widened backwards
// to a character boundary.
func holdOracle(text string, stops []string) int {
	h := 0
	for _, s := range stops {
		for k := min(len(s)-1, len(text)); k > h; k-- {
			if strings.HasSuffix(text, s[:k]) {
				h = k
				break
			}
		}
	}
	for h > 0 && h < len(text) && !utf8.RuneStart(text[len(text)-h]) {
		h++
	}
	return h
}

// stopAlphabet is small so that stops occur often and overlap, and has
// multibyte characters so that character boundaries matter.
var stopAlphabet = []string{"a", "b", "#", "\n", "中", "文", "😀", "é"}

func randomText(r *rand.Rand, n int) string {
	var sb strings.Builder
	for range n {
		sb.WriteString(stopAlphabet[r.IntN(len(stopAlphabet))])
	}
	return sb.String()
}

// runeSplits splits text into pieces of whole characters (random sizes,
// some empty).
func runeSplits(r *rand.Rand, text string) []string {
	var pieces []string
	for len(text) > 0 {
		n := 0
		for k := r.IntN(5); k > 0 && n < len(text); k-- {
			_, sz := utf8.DecodeRuneInString(text[n:])
			n += sz
		}
		pieces = append(pieces, text[:n])
		text = text[n:]
	}
	return pieces
}

// checkStopSplit runs one text through a matcher in the given pieces and
// compares everything observable against the oracles.
func checkStopSplit(t testing.TB, stops []string, include bool, pieces []string) {
	text := strings.Join(pieces, "")
	want, wantMatch := stopOracle(text, stops, include)
	m := NewStopMatcher(stops, include)
	var out []byte
	seen := ""
	matched := false
	for _, p := range pieces {
		var mt bool
		out, mt = m.Push(out, []byte(p))
		require.True(t, utf8.Valid(out), "output ends mid-character: %q", out)
		if matched {
			require.True(t, mt, "matched must stay true")
			continue
		}
		seen += p
		if mt {
			matched = true
			require.Zero(t, m.Held())
			continue
		}
		h := holdOracle(seen, stops)
		require.Equal(t, h, m.Held(), "hold after %q, stops %q", seen, stops)
		require.Equal(t, seen[:len(seen)-h], string(out), "released after %q, stops %q", seen, stops)
	}
	if !matched {
		out = m.Flush(out)
	}
	require.Equal(t, wantMatch, matched, "text %q stops %q pieces %q", text, stops, pieces)
	require.Equal(t, want, string(out), "text %q stops %q pieces %q", text, stops, pieces)
	if wantMatch {
		stop, ok := m.Matched()
		require.True(t, ok)
		// The oracle's cut identifies the stop by its length and end.
		if include {
			require.True(t, strings.HasSuffix(want, stop))
		} else {
			require.True(t, strings.HasPrefix(text[len(want):], stop))
		}
	}
}

func TestStopMatcherProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	iters := 20000
	if testing.Short() {
		iters = 2000
	}
	for range iters {
		var stops []string
		for k := r.IntN(4); k >= 0; k-- {
			stops = append(stops, randomText(r, r.IntN(4)))
		}
		text := randomText(r, r.IntN(40))
		include := r.IntN(2) == 0
		checkStopSplit(t, stops, include, runeSplits(r, text))
		checkStopSplit(t, stops, include, []string{text})
	}
}

func TestStopMatcherManyFirstBytes(t *testing.T) {
	// More distinct first bytes than the IndexByte path handles, and long
	// pushes so that both root fast paths run.
	r := rand.New(rand.NewPCG(7, 8))
	for range 2000 {
		stops := []string{"#a", "\nb", "中文", "é!", "😀😀", "ab" + randomText(r, 2)}
		text := strings.Repeat("xyz ", r.IntN(20)) + randomText(r, r.IntN(60)) + strings.Repeat("q", r.IntN(40))
		checkStopSplit(t, stops, false, []string{text})
		checkStopSplit(t, stops[:2], false, []string{text})
		checkStopSplit(t, stops[2:3], true, runeSplits(r, text))
	}
}
