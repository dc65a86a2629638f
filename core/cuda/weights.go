package cuda

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/lmstream/lmstream/core/cuda/cu"
	"github.com/lmstream/lmstream/core/cuda/kernels"
	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/quant"
)

// dmat is a weight matrix on the device, repacked from GGUF blocks into a
// quants array and a scales array, so that every quant load is an aligned
// 4-byte word (kernels.cu describes each layout above its mat-vec):
//
//	type  quants a block            scales a block
//	Q4_1  16 B nibbles / 32         d, m halves
//	Q8_0  32 int8s / 32             d half
//	Q5_0  16 B nibbles, qh u32 / 32 d half
//	Q4_K  128 B nibbles / 256       d, dmin halves, sc[8], m[8] bytes
//	Q6_K  ql[128], qh[64] / 256     d half, 2 zero bytes, sc[16] int8s
//
// F32 (embeddings only) keeps its floats in qs.
type dmat struct {
	typ        quant.Type
	rows, cols int
	qs, scales cu.DevicePtr
}

// matVecType reports whether weights of type t have a mat-vec kernel.
func matVecType(t quant.Type) bool { _, ok := kernels.MatVec[uint32(t)]; return ok }

// repack splits GGUF blocks into (scales, quants) as the kernels read them.
func repack(typ quant.Type, data []byte, rows, cols int) (qs, scales []byte, err error) {
	if typ != quant.F32 && !matVecType(typ) {
		return nil, nil, fmt.Errorf("type %s has no CUDA kernel yet (Q4_1, Q5_0, Q8_0, Q4_K, Q6_K)", typ)
	}
	if be := typ.BlockElems(); cols%be != 0 {
		return nil, nil, fmt.Errorf("type %s: rows of %d are not whole blocks", typ, cols)
	}
	if rb, _ := typ.RowBytes(cols); len(data) < rows*rb {
		return nil, nil, fmt.Errorf("type %s: %d bytes for %d rows of %d", typ, len(data), rows, cols)
	}
	nb := rows * cols / 32
	nsb := rows * cols / quant.QK
	switch typ {
	case quant.Q4_1: // d, m (halves), 16 bytes of nibbles
		qs, scales = make([]byte, nb*16), make([]byte, nb*4)
		for b := 0; b < nb; b++ {
			blk := data[b*20 : b*20+20]
			copy(scales[b*4:], blk[:4])
			copy(qs[b*16:], blk[4:])
		}
	case quant.Q8_0: // d (half), 32 int8s
		qs, scales = make([]byte, nb*32), make([]byte, nb*2)
		for b := 0; b < nb; b++ {
			blk := data[b*34 : b*34+34]
			copy(scales[b*2:], blk[:2])
			copy(qs[b*32:], blk[2:])
		}
	case quant.Q5_0: // d (half), qh (u32), 16 bytes of nibbles: qh moves after the nibbles
		qs, scales = make([]byte, nb*20), make([]byte, nb*2)
		for b := 0; b < nb; b++ {
			blk := data[b*22 : b*22+22]
			copy(scales[b*2:], blk[:2])
			copy(qs[b*20:], blk[6:22])
			copy(qs[b*20+16:], blk[2:6])
		}
	case quant.Q4_K: // d, dmin (halves), 12 bytes of 6-bit scales and mins, 128 of nibbles
		qs, scales = make([]byte, nsb*128), make([]byte, nsb*20)
		for b := 0; b < nsb; b++ {
			blk, sc := data[b*144:b*144+144], scales[b*20:b*20+20]
			copy(sc, blk[:4])
			for j := 0; j < 8; j++ {
				sc[4+j], sc[12+j] = scaleMinK4(j, blk[4:16])
			}
			copy(qs[b*128:], blk[16:144])
		}
	case quant.Q6_K: // ql[128], qh[64], 16 int8 scales, d (half)
		qs, scales = make([]byte, nsb*192), make([]byte, nsb*20)
		for b := 0; b < nsb; b++ {
			blk, sc := data[b*210:b*210+210], scales[b*20:b*20+20]
			copy(sc, blk[208:210])
			copy(sc[4:], blk[192:208])
			copy(qs[b*192:], blk[:192])
		}
	case quant.F32:
		qs = data[:rows*cols*4]
	}
	return qs, scales, nil
}

// scaleMinK4 unpacks the 6-bit scale and min of sub-block j (0..7) from
// the 12 scale bytes of a Q4_K block, as core/quant reads them: bytes 0..3
// hold sc_0..3 in their low 6 bits and 4..7 m_0..3; sub-blocks 4..7 keep
// their low 4 bits in bytes 8..11 (scale low nibble, min high) and their
// top 2 bits in the top bits of bytes 0..3 (scale) and 4..7 (min).
func scaleMinK4(j int, q []byte) (sc, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0xf | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

// loader uploads a GGUF file's tensors, checking their shapes, and keeps
// the first error.
type loader struct {
	f   *gguf.File
	r   *Runner
	err error
	// progress, if set, hears the share of the file's tensor bytes
	// uploaded so far after each tensor.
	progress    func(float64)
	done, total int
}

// uploaded counts t's bytes as uploaded and reports the share.
func (ld *loader) uploaded(t *gguf.Tensor) {
	if ld.progress == nil {
		return
	}
	if ld.total == 0 {
		for i := range ld.f.Tensors {
			ld.total += len(ld.f.Tensors[i].Data)
		}
	}
	ld.done += len(t.Data)
	ld.progress(min(1, float64(ld.done)/float64(max(ld.total, 1))))
}

func (ld *loader) tensor(name string, dims ...int) *gguf.Tensor {
	if ld.err != nil {
		return nil
	}
	t, ok := ld.f.Tensor(name)
	if !ok {
		ld.err = fmt.Errorf("cuda: tensor %s is missing", name)
		return nil
	}
	same := len(t.Dims) == len(dims)
	for i := 0; same && i < len(dims); i++ {
		same = t.Dims[i] == dims[i]
	}
	if !same {
		ld.err = fmt.Errorf("cuda: tensor %s has dims %v, the config wants %v", name, t.Dims, dims)
		return nil
	}
	ld.uploaded(t) // it is, by the time the caller looks up the next
	return t
}

// matrix uploads a rows×cols weight matrix (GGUF dims cols, rows). Matmul
// weights must have a mat-vec kernel (kernels.MatVec: Q4_1, Q5_0, Q8_0,
// Q4_K, Q6_K); the embedding table may also be F32.
func (ld *loader) matrix(name string, cols, rows int, embedding bool) dmat {
	t := ld.tensor(name, cols, rows)
	if t == nil {
		return dmat{}
	}
	if t.Type == quant.F32 && !embedding {
		ld.err = fmt.Errorf("cuda: tensor %s: F32 matrices have no CUDA matmul kernel yet", name)
		return dmat{}
	}
	if cols%32 != 0 {
		ld.err = fmt.Errorf("cuda: tensor %s has rows of %d, not a multiple of 32", name, cols)
		return dmat{}
	}
	qs, sc, err := repack(t.Type, t.Data, rows, cols)
	if err != nil {
		ld.err = fmt.Errorf("cuda: tensor %s: %w", name, err)
		return dmat{}
	}
	m := dmat{typ: t.Type, rows: rows, cols: cols}
	m.qs = ld.upload(qs)
	if len(sc) > 0 {
		m.scales = ld.upload(sc)
	}
	return m
}

// piece is one matrix of a fused product: its output rows start at column
// off of the fused output row.
type piece struct {
	m   dmat
	off int
}

// fused uploads matrices that read the same input (Q, K and V; gate and up)
// as one matrix of all their rows when they share a type, so one mat-vec
// launch computes them all; otherwise (a Q4_K_M file's Q6_K attn_v beside
// Q4_K attn_q and attn_k, say) as pieces, one launch each, writing their
// slices of the same output row. Every type reads the same activation
// blocks, so mixing types costs launches only.
func (ld *loader) fused(names []string, cols int, rows []int) []piece {
	if ld.err != nil {
		return nil
	}
	same := true
	var typ quant.Type
	for i, name := range names {
		t := ld.tensor(name, cols, rows[i])
		if t == nil {
			return nil
		}
		if i == 0 {
			typ = t.Type
		}
		same = same && t.Type == typ
	}
	if !same || !matVecType(typ) {
		var ps []piece
		off := 0
		for i, name := range names {
			ps = append(ps, piece{ld.matrix(name, cols, rows[i], false), off})
			off += rows[i]
		}
		return ps
	}
	m := dmat{typ: typ, cols: cols}
	var qs, sc []byte
	for i, name := range names {
		t, _ := ld.f.Tensor(name)
		q, s, err := repack(t.Type, t.Data, rows[i], cols)
		if err != nil {
			ld.err = fmt.Errorf("cuda: tensor %s: %w", name, err)
			return nil
		}
		qs, sc = append(qs, q...), append(sc, s...)
		m.rows += rows[i]
	}
	m.qs, m.scales = ld.upload(qs), ld.upload(sc)
	return []piece{{m, 0}}
}

// fusedBias uploads the concatenated biases of a fused product (zeros for
// the parts without one), or nothing when no part has a bias.
func (ld *loader) fusedBias(names []string, rows []int) cu.DevicePtr {
	var all []float32
	have := false
	for i, name := range names {
		v := make([]float32, rows[i])
		if t, ok := ld.f.Tensor(name); ok && ld.tensor(name, rows[i]) != nil {
			if err := quant.Dequantize(t.Type, t.Data, v); err != nil {
				ld.err = fmt.Errorf("cuda: tensor %s: %w", name, err)
			}
			have = true
		}
		all = append(all, v...)
	}
	if !have {
		return 0
	}
	return ld.upload(f32Bytes(all))
}

// vector uploads a float32 copy of a norm weight or bias.
func (ld *loader) vector(name string, n int) cu.DevicePtr {
	t := ld.tensor(name, n)
	if t == nil {
		return 0
	}
	v := make([]float32, n)
	if err := quant.Dequantize(t.Type, t.Data, v); err != nil {
		ld.err = fmt.Errorf("cuda: tensor %s: %w", name, err)
		return 0
	}
	return ld.upload(f32Bytes(v))
}

func (ld *loader) upload(b []byte) cu.DevicePtr {
	if ld.err != nil {
		return 0
	}
	p, err := ld.r.alloc(len(b))
	if err == nil {
		err = ld.r.dev.ctx.HtoD(p, b)
	}
	if err != nil {
		ld.err = err
		return 0
	}
	return p
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}
