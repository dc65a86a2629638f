//go:build !linux

package quant

func allocArena(size int) ([]byte, func()) { return goArena(size) }
