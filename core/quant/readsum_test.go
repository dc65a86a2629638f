package quant

import "testing"

func TestReadSum(t *testing.T) {
	for _, n := range []int{0, 7, 8, 127, 128, 129, 1000, 4096 + 24} {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*131 + 7)
		}
		var want uint64
		for i := 0; i+8 <= n; i += 8 {
			want += le64(b[i:])
		}
		if got := ReadSum(b); got != want {
			t.Fatalf("n=%d: ReadSum %d, want %d", n, got, want)
		}
	}
}
