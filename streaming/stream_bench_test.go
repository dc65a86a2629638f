package streaming

import "testing"

type benchVocab struct{}

func (benchVocab) Size() int               { return 256 }
func (benchVocab) Piece(id int32) []byte   { return []byte{byte(id)} }
func (benchVocab) IsSpecial(id int32) bool { return false }

// BenchmarkStreamChunk is the per-chunk work of the engine side of a stream:
// decode one token, emit a chunk, and pop it, as one engine iteration and one
// consumer pop do. Its allocations per op are what every chunk costs the GC.
func BenchmarkStreamChunk(b *testing.B) {
	c := NewChannel()
	sink, _ := c.Attach(0, nil, nil)
	s := NewStream(sink, benchVocab{}, []string{"\n\nUser:"}, false)
	tok := []int32{'a'}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		tok[0] = 'a' + int32(i%26)
		s.Accept(tok, false)
		s.Emit()
		c.PopEach(0, func(*Chunk) bool { return true })
	}
}
