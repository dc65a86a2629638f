package streaming

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// wellFormed is Table 3-7 of the Unicode Standard ("Well-Formed UTF-8 Byte
// Sequences"), transcribed row by row. The oracle below works from it alone,
// independent of the tables in sanitize.go.
var wellFormed = [][][2]byte{
	{{0x00, 0x7F}},
	{{0xC2, 0xDF}, {0x80, 0xBF}},
	{{0xE0, 0xE0}, {0xA0, 0xBF}, {0x80, 0xBF}},
	{{0xE1, 0xEC}, {0x80, 0xBF}, {0x80, 0xBF}},
	{{0xED, 0xED}, {0x80, 0x9F}, {0x80, 0xBF}},
	{{0xEE, 0xEF}, {0x80, 0xBF}, {0x80, 0xBF}},
	{{0xF0, 0xF0}, {0x90, 0xBF}, {0x80, 0xBF}, {0x80, 0xBF}},
	{{0xF1, 0xF3}, {0x80, 0xBF}, {0x80, 0xBF}, {0x80, 0xBF}},
	{{0xF4, 0xF4}, {0x80, 0x8F}, {0x80, 0xBF}, {0x80, 0xBF}},
}

// oracleDecode is a deliberately slow, obviously correct decoder for the
// maximal-subpart rule: at each position, measure how many bytes match each
// row of Table 3-7. A full match is a character; otherwise the longest
// partial match (at least one byte) is one maximal invalid subpart and
// becomes one U+FFFD.
func oracleDecode(p []byte) []byte {
	var out []byte
	for i := 0; i < len(p); {
		best := 0
		complete := false
		for _, row := range wellFormed {
			m := 0
			for m < len(row) && i+m < len(p) && p[i+m] >= row[m][0] && p[i+m] <= row[m][1] {
				m++
			}
			if m == len(row) {
				complete = true
			}
			best = max(best, m)
		}
		if complete {
			out = append(out, p[i:i+best]...)
			i += best
			continue
		}
		out = append(out, "\uFFFD"...)
		i += max(best, 1)
	}
	return out
}

// sanitizeSplit feeds p to a fresh Sanitizer in pieces of the given sizes
// (the rest in one piece) and checks the invariants that must hold after
// every Write: what it appended is well-formed on its own (it may become a
// chunk) and at most 3 bytes are held.
func sanitizeSplit(t testing.TB, p []byte, sizes []int) []byte {
	var s Sanitizer
	var out []byte
	for _, n := range sizes {
		n = min(n, len(p))
		before := len(out)
		out = s.Write(out, p[:n])
		p = p[n:]
		// Plain ifs: this runs per piece inside the fuzzer.
		if !utf8.Valid(out[before:]) {
			t.Fatalf("output not well-formed: %q", out[before:])
		}
		if s.Held() > 3 {
			t.Fatalf("held %d bytes", s.Held())
		}
	}
	out = s.Write(out, p)
	out = s.Flush(out)
	require.Zero(t, s.Held())
	return out
}

func TestOracleDecode(t *testing.T) {
	// The oracle itself must agree with known Python results.
	require.Equal(t, "\uFFFDA", string(oracleDecode([]byte("\xE4\xB8A"))))
	require.Equal(t, "\uFFFD\uFFFD\uFFFD", string(oracleDecode([]byte("\xE0\x80\xAF"))))
	require.Equal(t, "😀", string(oracleDecode([]byte("😀"))))
}

func TestSanitizerTable(t *testing.T) {
	emoji := []byte("\U0001F600") // F0 9F 98 80
	tests := []struct {
		name   string
		pieces []string
		want   string
		// held, when set, is the number of bytes held after each piece.
		held []int
	}{
		{"emoji whole", []string{string(emoji)}, "\U0001F600", []int{0}},
		{"emoji 2+2", []string{string(emoji[:2]), string(emoji[2:])}, "\U0001F600", []int{2, 0}},
		{"emoji 1+3", []string{string(emoji[:1]), string(emoji[1:])}, "\U0001F600", []int{1, 0}},
		{"emoji 1+1+1+1", []string{string(emoji[:1]), string(emoji[1:2]), string(emoji[2:3]), string(emoji[3:])}, "\U0001F600", []int{1, 2, 3, 0}},
		{"isolated continuation", []string{"a\x80b"}, "a\uFFFDb", nil},
		{"real U+FFFD passes", []string{"x\uFFFDy"}, "x\uFFFDy", nil},
		{"real U+FFFD split", []string{"\xEF", "\xBF", "\xBD"}, "\uFFFD", []int{1, 2, 0}},
		{"1000 x FF", []string{strings.Repeat("\xFF", 1000)}, strings.Repeat("\uFFFD", 1000), []int{0}},
		{"truncated 3-byte leader flushed", []string{"ab\xE4\xB8"}, "ab\uFFFD", []int{2}},
		{"overlong C0 AF", []string{"\xC0\xAF"}, "\uFFFD\uFFFD", nil},
		{"overlong E0 80 AF", []string{"\xE0\x80\xAF"}, "\uFFFD\uFFFD\uFFFD", nil},
		{"overlong F0 80 80 AF", []string{"\xF0\x80\x80\xAF"}, "\uFFFD\uFFFD\uFFFD\uFFFD", nil},
		{"surrogate ED A0 80", []string{"\xED\xA0\x80"}, "\uFFFD\uFFFD\uFFFD", nil},
		{"above max F4 90 80 80", []string{"\xF4\x90\x80\x80"}, "\uFFFD\uFFFD\uFFFD\uFFFD", nil},
		{"F5", []string{"\xF5"}, "\uFFFD", []int{0}},
		{"truncated then ASCII E4 B8 41", []string{"\xE4\xB8\x41"}, "\uFFFDA", []int{0}},
		{"truncated then ASCII split", []string{"\xE4", "\xB8", "\x41"}, "\uFFFDA", []int{1, 2, 0}},
		{"truncated then new leader", []string{"\xE4\xB8", "\xE4\xB8\xAD"}, "\uFFFD中", []int{2, 0}},
		{"max code point", []string{"\xF4\x8F", "\xBF\xBF"}, "\U0010FFFF", []int{2, 0}},
		{"held then invalid second byte", []string{"\xF0", "\x80"}, "\uFFFD\uFFFD", []int{1, 0}},
		{"empty pieces", []string{"", "\xE4", "", "\xB8\xAD", ""}, "中", []int{0, 1, 1, 0, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s Sanitizer
			var out []byte
			for i, p := range tc.pieces {
				out = s.Write(out, []byte(p))
				if tc.held != nil {
					require.Equal(t, tc.held[i], s.Held(), "held after piece %d", i)
				}
			}
			out = s.Flush(out)
			require.Equal(t, tc.want, string(out))
			require.Zero(t, s.Held())
			require.Equal(t, tc.want, string(oracleDecode([]byte(strings.Join(tc.pieces, "")))), "oracle disagrees")
		})
	}
}

// TestSanitizerEmbedded places every invalid or edge sequence inside long
// multibyte text at every offset, so the block fast paths, not only the
// per-sequence path, meet each of them.
func TestSanitizerEmbedded(t *testing.T) {
	needles := []string{
		"\x80", "\xBF", "\xC0\xAF", "\xC1\xBF", "\xE0\x80\xAF", "\xE0\x9F\xBF", "\xED\xA0\x80", "\xED\xBF\xBF",
		"\xF0\x80\x80\xAF", "\xF0\x8F\xBF\xBF", "\xF4\x90\x80\x80", "\xF4\xBF\xBF\xBF", "\xF5\x80\x80\x80",
		"\xFF", "\xE4\xB8A", "\xF0\x9F\x98A", "\xE4\xB8", "\xF0\x9F\x98",
		"\xED\x9F\xBF", "\xEE\x80\x80", "\xF4\x8F\xBF\xBF", "\xF0\x90\x80\x80", "\xE0\xA0\x80", "\xC2\x80",
	}
	ctx := strings.Repeat("中é😀a", 8)
	for _, nd := range needles {
		for off := 0; off <= 40; off++ {
			p := []byte(ctx[:off] + nd + ctx)
			want := string(oracleDecode(p))
			require.Equal(t, want, string(sanitizeSplit(t, p, nil)), "needle %x at %d", nd, off)
			require.Equal(t, want, string(sanitizeSplit(t, p, []int{off + 1})), "needle %x at %d, split", nd, off)
		}
	}
}

func TestSanitizerEmitsReplacementEarly(t *testing.T) {
	// Invalid bytes must become U+FFFD as soon as they are known to be
	// invalid, not at the next Flush.
	var s Sanitizer
	require.Equal(t, "", string(s.Write(nil, []byte{0xE4, 0xB8})))
	require.Equal(t, "\uFFFDA", string(s.Write(nil, []byte{0x41})))
	require.Equal(t, "\uFFFD\uFFFD", string(s.Write(nil, []byte{0xED, 0xA0})), "ED A0 is known bad at A0")
	require.Equal(t, 0, s.Held())
	require.Equal(t, "\uFFFD", string(s.Write(nil, []byte{0xFF})))
	require.Equal(t, "", string(s.Write(nil, []byte{0xE4})))
	require.Equal(t, "\uFFFD\uFFFD", string(s.Write(nil, []byte{0xFF})))
}

func TestSanitizerResetAndAppend(t *testing.T) {
	var s Sanitizer
	out := s.Write([]byte("prefix:"), []byte("ok\xE4"))
	require.Equal(t, "prefix:ok", string(out))
	require.Equal(t, 1, s.Held())
	s.Reset()
	require.Zero(t, s.Held())
	require.Equal(t, "\uFFFD", string(s.Write(nil, []byte{0xB8})), "Reset must forget the held leader")
	require.Equal(t, "", string(s.Flush(nil)))
}

func TestSanitizerNoAllocs(t *testing.T) {
	p := []byte(strings.Repeat("héllo 中文 😀 \xFF\xE4\xB8A ", 20) + "\xF0\x9F")
	dst := make([]byte, 0, 4*len(p))
	var s Sanitizer
	allocs := testing.AllocsPerRun(100, func() {
		s.Reset()
		out := dst[:0]
		for i := 0; i < len(p); i += 3 {
			out = s.Write(out, p[i:min(i+3, len(p))])
		}
		_ = s.Flush(out)
	})
	require.Zero(t, allocs)
}

// randomBytes builds test input that exercises every branch: ASCII runs,
// valid multibyte characters (including the edges of Table 3-7), junk,
// lone continuation bytes, and 4-byte leaders that are often cut short.
func randomBytes(r *rand.Rand, n int) []byte {
	edges := []string{"\u0080", "\u07FF", "\u0800", "\uD7FF", "\uE000", "\uFFFD", "\uFFFF", "\U00010000", "\U0010FFFF", "中", "文", "😀", "é"}
	var p []byte
	for len(p) < n {
		switch r.IntN(6) {
		case 0:
			for k := r.IntN(12); k >= 0; k-- {
				p = append(p, byte(0x20+r.IntN(0x5F)))
			}
		case 1:
			p = append(p, edges[r.IntN(len(edges))]...)
		case 2:
			p = append(p, byte(r.IntN(256)))
		case 3:
			p = append(p, byte(0x80+r.IntN(0x40)))
		case 4:
			p = append(p, byte(0xF0+r.IntN(8)))
		case 5:
			// A truncated prefix of a valid character.
			e := edges[r.IntN(len(edges))]
			p = append(p, e[:r.IntN(len(e))+1]...)
		}
	}
	return p
}

func randomSizes(r *rand.Rand, total int) []int {
	var sizes []int
	for total > 0 {
		n := r.IntN(min(total, 9) + 1) // includes empty pieces
		sizes = append(sizes, n)
		total -= n
	}
	return sizes
}

func TestSanitizerProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	iters := 20000
	if testing.Short() {
		iters = 2000
	}
	for it := 0; it < iters; it++ {
		p := randomBytes(r, r.IntN(64))
		want := oracleDecode(p)
		require.Equal(t, string(want), string(sanitizeSplit(t, p, nil)), "whole %x", p)
		sizes := randomSizes(r, len(p))
		require.Equal(t, string(want), string(sanitizeSplit(t, p, sizes)), "input %x split %v", p, sizes)
		// Byte by byte is the worst case for the held state.
		ones := make([]int, len(p))
		for i := range ones {
			ones[i] = 1
		}
		require.Equal(t, string(want), string(sanitizeSplit(t, p, ones)), "input %x byte by byte", p)
	}
}

// mostlyValid builds long runs of well-formed text of every character length
// with rare defects, so that the block fast paths of Write see whole blocks
// that are valid, end mid-character, or hide one bad byte.
func mostlyValid(r *rand.Rand, n int) []byte {
	chars := []string{"a", "bc", " ", "é", "ß", "中", "文", "\uFFFD", "\U0010FFFF", "😀", "\u0800", "\uD7FF", "\uE000", "\U00010000"}
	var p []byte
	for len(p) < n {
		if r.IntN(200) == 0 {
			p = append(p, randomBytes(r, 1)...)
			continue
		}
		p = append(p, chars[r.IntN(len(chars))]...)
	}
	return p
}

func TestSanitizerLongProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for range 3000 {
		p := mostlyValid(r, r.IntN(600))
		want := string(oracleDecode(p))
		require.Equal(t, want, string(sanitizeSplit(t, p, nil)), "input %x", p)
		var sizes []int
		for total := len(p); total > 0; {
			n := r.IntN(min(total, 100) + 1)
			sizes = append(sizes, n)
			total -= n
		}
		require.Equal(t, want, string(sanitizeSplit(t, p, sizes)), "input %x split %v", p, sizes)
	}
}

func TestSanitizerExhaustiveShort(t *testing.T) {
	// Every byte pair, and every split of it, against the oracle. Cheap and
	// catches any mistake in the leader and second-byte tables.
	for a := 0; a < 256; a++ {
		for b := 0; b < 256; b++ {
			p := []byte{byte(a), byte(b), 'z'}
			want := string(oracleDecode(p))
			require.Equal(t, want, string(sanitizeSplit(t, p, nil)))
			require.Equal(t, want, string(sanitizeSplit(t, p, []int{1})))
			require.Equal(t, want, string(sanitizeSplit(t, p, []int{2})))
		}
	}
}

// TestSanitizerMatchesPython checks the contract against the reference
// itself: CPython's bytes.decode("utf-8", "replace").
func TestSanitizerMatchesPython(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not on PATH")
	}
	r := rand.New(rand.NewPCG(3, 4))
	var inputs [][]byte
	var buf bytes.Buffer
	for i := 0; i < 200; i++ {
		p := randomBytes(r, 1+r.IntN(80))
		inputs = append(inputs, p)
		buf.WriteString(hex.EncodeToString(p))
		buf.WriteByte('\n')
	}
	in := filepath.Join(t.TempDir(), "inputs.hex")
	require.NoError(t, os.WriteFile(in, buf.Bytes(), 0o600))
	script := `import sys
for line in open(sys.argv[1]):
    print(bytes.fromhex(line.strip()).decode("utf-8", "replace").encode("utf-8").hex())
`
	out, err := exec.Command(py, "-c", script, in).Output()
	require.NoError(t, err)
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for i, p := range inputs {
		require.True(t, sc.Scan(), "python printed too few lines")
		want, err := hex.DecodeString(sc.Text())
		require.NoError(t, err)
		require.Equal(t, string(want), string(oracleDecode(p)), "oracle vs python on %x", p)
		sizes := randomSizes(r, len(p))
		require.Equal(t, string(want), string(sanitizeSplit(t, p, sizes)), "input %d %x split %v", i, p, sizes)
	}
}
