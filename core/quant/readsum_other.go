//go:build !amd64 || noasm

package quant

func readSum(b []byte) uint64 { return readSumGeneric(b) }
