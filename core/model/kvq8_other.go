//go:build !amd64 || noasm

package model

func dequantQ80AVX2(dst *float32, src *uint16, nb int) { panic("unreachable") }
