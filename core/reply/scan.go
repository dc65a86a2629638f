package reply

import (
	"bytes"
	"strings"
)

// A thinkPair is how a family marks reasoning at the start of an answer.
type thinkPair struct{ open, close string }

// thinkPairs are the reasoning markers every parser honours at the start
// of an answer: <think> (Qwen3, DeepSeek-R1, GLM, MiniMax-M2, Kimi, SmolLM3,
// ...), Seed-OSS, Magistral/Ministral, MiniMax-M3 and Kimi-VL's spellings.
var thinkPairs = []thinkPair{
	{"<think>", "</think>"},
	{"<seed:think>", "</seed:think>"},
	{"[THINK]", "[/THINK]"},
	{"<mm:think>", "</mm:think>"},
	{"◁think▷", "◁/think▷"},
}

// isBlank reports whether c is whitespace that separates syntax.
func isBlank(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

// skipBlanks is the index of the first non-blank byte of b at or after i.
func skipBlanks(b []byte, i int) int {
	for i < len(b) && isBlank(b[i]) {
		i++
	}
	return i
}

// blankTail is where the run of blanks that ends b starts.
func blankTail(b []byte) int {
	i := len(b)
	for i > 0 && isBlank(b[i-1]) {
		i--
	}
	return i
}

// findFirst finds the earliest complete occurrence of any marker in b
// (at or after from). Without one, hold is where a suffix of b that is a
// proper prefix of some marker begins (len(b) when none): text from hold
// on may still become a marker.
func findFirst(b []byte, from int, markers []string) (at int, which string, hold int) {
	at = -1
	for _, m := range markers {
		if i := bytes.Index(b[from:], []byte(m)); i >= 0 && (at < 0 || from+i < at) {
			at, which = from+i, m
		}
	}
	if at >= 0 {
		return at, which, at
	}
	return -1, "", partialTail(b, from, markers)
}

// partialTail is where the longest suffix of b[from:] that is a proper
// prefix of one of markers begins; len(b) when there is none.
func partialTail(b []byte, from int, markers []string) int {
	longest := 0
	for _, m := range markers {
		longest = max(longest, len(m))
	}
	start := max(from, len(b)-longest+1)
	for k := start; k < len(b); k++ {
		for _, m := range markers {
			if len(b)-k < len(m) && strings.HasPrefix(m, string(b[k:])) {
				return k
			}
		}
	}
	return len(b)
}

// isPrefixOfAny reports whether b is a proper prefix of one of markers.
func isPrefixOfAny(b []byte, markers []string) bool {
	for _, m := range markers {
		if len(b) < len(m) && strings.HasPrefix(m, string(b)) {
			return true
		}
	}
	return false
}

// jsonExtent finds where the JSON value that starts at b[0] ('{' or '[')
// ends, scanning iteratively (no recursion, any depth). It resumes from a
// previous scan of a shorter b with the same start: the state is kept in
// the struct. end is the index just past the value, or -1 while it is
// incomplete.
type jsonExtent struct {
	pos      int
	depth    int
	inString bool
	escaped  bool
}

func (s *jsonExtent) scan(b []byte) (end int) {
	for ; s.pos < len(b); s.pos++ {
		c := b[s.pos]
		if s.inString {
			switch {
			case s.escaped:
				s.escaped = false
			case c == '\\':
				s.escaped = true
			case c == '"':
				s.inString = false
			}
			continue
		}
		switch c {
		case '"':
			s.inString = true
		case '{', '[':
			s.depth++
		case '}', ']':
			s.depth--
			if s.depth <= 0 {
				s.pos++
				return s.pos
			}
		}
	}
	return -1
}
