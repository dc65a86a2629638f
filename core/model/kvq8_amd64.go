//go:build !noasm

package model

// dequantQ80AVX2 widens nb Q8_0 blocks at src (17 uint16s each: a float16
// scale and 32 int8s) into 32·nb floats at dst (kvq8_amd64.s).
//
//go:noescape
func dequantQ80AVX2(dst *float32, src *uint16, nb int)
