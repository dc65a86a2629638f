package tokenizer

import (
	"sort"
	"strings"
)

// specialMatcher finds the texts of control and user-defined tokens inside
// input text. Candidates are bucketed by first byte and tried longest first,
// so a scan is one table lookup per input byte plus a few prefix compares
// where a bucket is non-empty ("<" in most vocabularies).
type specialMatcher struct {
	first   [256][]specialText
	anyUser bool // some user-defined token exists, so matching runs even without ParseSpecial
}

type specialText struct {
	text    string
	id      int32
	control bool // recognised only with ParseSpecial
}

func newSpecialMatcher(tokens []string, types []TokenType) specialMatcher {
	var m specialMatcher
	for i, s := range tokens {
		if s == "" {
			continue
		}
		switch types[i] {
		case TypeControl:
			m.first[s[0]] = append(m.first[s[0]], specialText{s, int32(i), true})
		case TypeUserDefined:
			m.first[s[0]] = append(m.first[s[0]], specialText{s, int32(i), false})
			m.anyUser = true
		}
	}
	for b := range m.first {
		c := m.first[b]
		// Longest first, so "<|im_start|>" wins over a shorter prefix of it;
		// then lowest id, so the choice among duplicates is stable.
		sort.SliceStable(c, func(i, j int) bool {
			if len(c[i].text) != len(c[j].text) {
				return len(c[i].text) > len(c[j].text)
			}
			return c[i].id < c[j].id
		})
	}
	return m
}

// find returns the leftmost-longest special text in s, or start -1.
func (m *specialMatcher) find(s string, parseSpecial bool) (start, end int, id int32) {
	if !parseSpecial && !m.anyUser {
		return -1, -1, -1
	}
	for i := 0; i < len(s); i++ {
		for _, c := range m.first[s[i]] {
			if c.control && !parseSpecial {
				continue
			}
			if strings.HasPrefix(s[i:], c.text) {
				return i, i + len(c.text), c.id
			}
		}
	}
	return -1, -1, -1
}
