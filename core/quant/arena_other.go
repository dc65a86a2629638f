//go:build !linux

package quant

func adviseHugePages(b []byte) {}
