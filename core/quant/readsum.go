package quant

// ReadSum adds up b as little-endian uint64 words (a trailing partial word
// is ignored). It exists to measure memory read bandwidth: on amd64 it
// streams with 256-bit loads, four independent accumulators, so that the
// loop is bound by memory, not by instruction throughput (a plain Go loop
// over uint64s tops out near 8 GB/s on one core of a 2-core EPYC, below
// what DRAM delivers, which would overstate how close decode gets to it).
func ReadSum(b []byte) uint64 {
	n := len(b) &^ 127
	s := readSum(b[:n])
	for i := n; i+8 <= len(b); i += 8 {
		s += le64(b[i:])
	}
	return s
}

func readSumGeneric(b []byte) uint64 {
	var s0, s1, s2, s3 uint64
	for i := 0; i+32 <= len(b); i += 32 {
		s0 += le64(b[i:])
		s1 += le64(b[i+8:])
		s2 += le64(b[i+16:])
		s3 += le64(b[i+24:])
	}
	return s0 + s1 + s2 + s3
}

func le64(b []byte) uint64 {
	_ = b[7]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}
