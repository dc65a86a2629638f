//go:build !amd64 || noasm

package quant

func pack8(wt Type, w []byte, wrb, rows, cols, g int, dst []byte) {
	pack8Go(wt, w, wrb, rows, cols, g, dst)
}
