package reply

import "bytes"

// closerSearch finds a unit's closing marker in a growing body without
// rescanning what was already searched (a long call costs linear time).
type closerSearch struct{ from int }

// find is the index of closer in body, or -1 (then the next search starts
// where a closer could still begin).
func (s *closerSearch) find(body []byte, closer string) int {
	if s.from > len(body) {
		s.from = 0
	}
	if i := bytes.Index(body[s.from:], []byte(closer)); i >= 0 {
		at := s.from + i
		s.from = 0
		return at
	}
	s.from = max(0, len(body)-len(closer)+1)
	return -1
}
