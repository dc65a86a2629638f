package quant

import (
	"math"
	"sync"
)

// Quantizers of the grid i-quants (iq3.go). They are for writing test
// models (core/model/synth) and round-trip tests, not for producing good
// low-bit files: every sub-block maps its largest magnitude to the grid's
// largest level and each group of magnitudes to its nearest grid entry by
// exhaustive search, where GGML's quantizer searches scales under an
// importance matrix. What matters here is that the blocks are valid and
// that dequantization gives back roughly the input.

// nearestEntry is the index of the first grid entry closest (in L2) to v.
func nearestEntry(grid [][4]uint8, v []float32) int {
	best, bd := 0, float32(math.Inf(1))
	for k := range grid {
		g := &grid[k]
		var e float32
		for i, t := range v[:4] {
			d := float32(g[i]) - t
			e += d * d
		}
		if e < bd {
			best, bd = k, e
		}
	}
	return best
}

// gridLookup finds a grid entry for 4 magnitudes in constant time. A
// table built on first use maps each 12-bit code of 4 levels (3 bits each)
// to the grid entry nearest those levels; a lookup tries the codes made of
// the levels either side of each magnitude (16 of them) and keeps, of
// their entries, the one nearest the magnitudes. That is nearly always the
// nearest entry of all, where a search of every entry per group made a
// test model's head take seconds.
type gridLookup struct {
	grid   [][4]uint8
	levels *[8]uint8
	once   sync.Once
	table  []uint16
}

func (g *gridLookup) nearest(v []float32) int {
	g.once.Do(func() {
		g.table = make([]uint16, 1<<12)
		var p [4]float32
		for c := range g.table {
			for i := range p {
				p[i] = float32(g.levels[c>>(3*i)&7])
			}
			g.table[c] = uint16(nearestEntry(g.grid, p[:]))
		}
	})
	var lo, hi [4]int
	for i, t := range v[:4] {
		lo[i], hi[i] = bracketLevels(g.levels, t)
	}
	best, bd := 0, float32(math.Inf(1))
	for m := 0; m < 16; m++ {
		c := 0
		for i := 0; i < 4; i++ {
			li := lo[i]
			if m>>i&1 != 0 {
				li = hi[i]
			}
			c |= li << (3 * i)
		}
		k := int(g.table[c])
		var e float32
		for i, t := range v[:4] {
			d := float32(g.grid[k][i]) - t
			e += d * d
		}
		if e < bd || e == bd && k < best {
			best, bd = k, e
		}
	}
	return best
}

// bracketLevels is the indices of the sorted levels either side of t (the
// same one twice beyond the ends).
func bracketLevels(levels *[8]uint8, t float32) (lo, hi int) {
	for hi = 0; hi < len(levels)-1 && float32(levels[hi]) < t; hi++ {
	}
	lo = max(hi-1, 0)
	if float32(levels[hi]) <= t {
		lo = hi
	}
	return lo, hi
}

var (
	iq3sLookup   = gridLookup{grid: iq3sGrid, levels: &iq3sLevels}
	iq3xxsLookup = gridLookup{grid: iq3xxsGrid, levels: &iq3xxsLevels}
)

// signBits is bit i set where x[i] < 0, over 8 values.
func signBits(x []float32) uint8 {
	var m uint8
	for i, v := range x[:8] {
		if v < 0 {
			m |= 1 << i
		}
	}
	return m
}

// evenSignBits is signBits with an even count of negatives (evenSigns'
// encoding): where the count is odd, the sign of the smallest magnitude
// flips, the cheapest error to make.
func evenSignBits(x []float32) uint8 {
	m := signBits(x)
	p := m ^ m>>4
	p ^= p >> 2
	p ^= p >> 1
	if p&1 != 0 {
		j, a := 0, float32(math.Inf(1))
		for i, v := range x[:8] {
			if av := float32(math.Abs(float64(v))); av < a {
				j, a = i, av
			}
		}
		m ^= 1 << j
	}
	return m
}

// magnitudes is |x[i]|·id for the first n values.
func magnitudes(x []float32, id float32, n int) (v [8]float32) {
	for i := 0; i < n; i++ {
		v[i] = float32(math.Abs(float64(x[i]))) * id
	}
	return v
}

// subBlockScales is each 32-element sub-block's largest magnitude over top
// (the wanted step of its levels) and the largest of those.
func subBlockScales(x []float32, top float32) (dl [8]float32, mx float32) {
	for s := 0; s < 8; s++ {
		amax, _ := absMax(x[32*s : 32*s+32])
		dl[s] = amax / top
		mx = max(mx, dl[s])
	}
	return dl, mx
}

// quantizeIQ3S: 2·ls+1 ∈ {1, 3, …, 31} steps of d per sub-block.
func quantizeIQ3S(x []float32, b []byte) {
	want, mx := subBlockScales(x, 15)
	hd := F32ToF16(mx / 31)
	put16(b, hd)
	d := F16ToF32(hd)
	clear(b[2:110])
	for s := 0; s < 8; s++ {
		ls := roundClamp((want[s]*inv(d)-1)/2, 0, 15)
		b[106+s/2] |= byte(ls) << (4 * (s % 2))
		id := inv(d * float32(2*ls+1))
		for k := 0; k < 8; k++ {
			e := 32*s + 4*k
			v := magnitudes(x[e:], id, 4)
			idx := iq3sLookup.nearest(v[:4])
			b[2+8*s+k] = byte(idx)
			b[66+s] |= byte(idx>>8) << k
		}
		for l := 0; l < 4; l++ {
			b[74+4*s+l] = signBits(x[32*s+8*l:])
		}
	}
}

// quantizeIQ3XXS: (ls+½)/2 ∈ {¼, ¾, …, 7¾} steps of d per sub-block.
func quantizeIQ3XXS(x []float32, b []byte) {
	want, mx := subBlockScales(x, 62)
	hd := F32ToF16(mx / 7.75)
	put16(b, hd)
	d := F16ToF32(hd)
	for s := 0; s < 8; s++ {
		ls := roundClamp(want[s]*inv(d)*2-0.5, 0, 15)
		id := inv(d * (0.5 + float32(ls)) * 0.5)
		aux := uint32(ls) << 28
		for l := 0; l < 4; l++ {
			e := 32*s + 8*l
			for h := 0; h < 2; h++ {
				v := magnitudes(x[e+4*h:], id, 4)
				b[2+8*s+2*l+h] = byte(iq3xxsLookup.nearest(v[:4]))
			}
			aux |= uint32(evenSignBits(x[e:])&127) << (7 * l)
		}
		put32(b[66+4*s:], aux)
	}
}

// gridLookup8 is gridLookup for the 8-element grids of IQ2 over the three
// levels 8, 25, 43: the table maps the 16-bit code of 8 rounded levels
// (2 bits each, as the grids' codes) to the entry nearest them, and a
// lookup tries that code and the 8 that move one magnitude to the level on
// the other side of it, a cheap stand-in for the 256 codes bracketing the
// magnitudes.
type gridLookup8 struct {
	grid  [][8]uint8
	once  sync.Once
	table []uint16
}

func nearestEntry8(grid [][8]uint8, v []float32) int {
	best, bd := 0, float32(math.Inf(1))
	for k := range grid {
		g := &grid[k]
		var e float32
		for i, t := range v[:8] {
			d := float32(g[i]) - t
			e += d * d
		}
		if e < bd {
			best, bd = k, e
		}
	}
	return best
}

func (g *gridLookup8) nearest(v []float32) int {
	g.once.Do(func() {
		g.table = make([]uint16, 1<<16)
		var p [8]float32
		for c := range g.table {
			ok := true
			for i := range p {
				li := c >> (2 * i) & 3
				ok = ok && li < 3
				p[i] = float32(iq2Levels[li])
			}
			if ok {
				g.table[c] = uint16(nearestEntry8(g.grid, p[:]))
			}
		}
	})
	var near, other [8]int
	c := 0
	for i, t := range v[:8] {
		lo, hi := 0, 1
		if t > float32(iq2Levels[1]) {
			lo, hi = 1, 2
		}
		near[i], other[i] = lo, hi
		if t-float32(iq2Levels[lo]) > float32(iq2Levels[hi])-t {
			near[i], other[i] = hi, lo
		}
		c |= near[i] << (2 * i)
	}
	dist := func(k int) (e float32) {
		for i, t := range v[:8] {
			d := float32(g.grid[k][i]) - t
			e += d * d
		}
		return e
	}
	best := int(g.table[c])
	bd := dist(best)
	for i := 0; i < 8; i++ {
		k := int(g.table[c&^(3<<(2*i))|other[i]<<(2*i)])
		if e := dist(k); e < bd || e == bd && k < best {
			best, bd = k, e
		}
	}
	return best
}

var (
	iq2xxsLookup = gridLookup8{grid: iq2xxsGrid}
	iq2xsLookup  = gridLookup8{grid: iq2xsGrid}
	iq2sLookup   = gridLookup8{grid: iq2sGrid}
)

// iq2Step is the IQ2 scale step: (ls+½)/4 steps of d, ls = 0..15, for a
// wanted step want.
func iq2Step(want, d float32) (ls int, step float32) {
	ls = roundClamp(want*inv(d)*4-0.5, 0, 15)
	return ls, d * (0.5 + float32(ls)) * 0.25
}

// quantizeIQ2XXS: one scale per 32-element sub-block.
func quantizeIQ2XXS(x []float32, b []byte) {
	want, mx := subBlockScales(x, 43)
	hd := F32ToF16(mx / 3.875)
	put16(b, hd)
	d := F16ToF32(hd)
	for s := 0; s < 8; s++ {
		ls, step := iq2Step(want[s], d)
		aux := uint32(ls) << 28
		for l := 0; l < 4; l++ {
			e := 32*s + 8*l
			v := magnitudes(x[e:], inv(step), 8)
			b[2+8*s+l] = byte(iq2xxsLookup.nearest(v[:]))
			aux |= uint32(evenSignBits(x[e:])&127) << (7 * l)
		}
		put32(b[6+8*s:], aux)
	}
}

// halfScales is each 16-element half's largest magnitude over 43 and the
// largest of those.
func halfScales(x []float32) (want [16]float32, mx float32) {
	for h := 0; h < 16; h++ {
		amax, _ := absMax(x[16*h : 16*h+16])
		want[h] = amax / 43
		mx = max(mx, want[h])
	}
	return want, mx
}

// quantizeIQ2XS: one scale per 16-element half sub-block.
func quantizeIQ2XS(x []float32, b []byte) {
	want, mx := halfScales(x)
	hd := F32ToF16(mx / 3.875)
	put16(b, hd)
	d := F16ToF32(hd)
	for s := 0; s < 8; s++ {
		b[66+s] = 0
		for h := 0; h < 2; h++ {
			ls, step := iq2Step(want[2*s+h], d)
			b[66+s] |= byte(ls) << (4 * h)
			for l := 2 * h; l < 2*h+2; l++ {
				e := 32*s + 8*l
				v := magnitudes(x[e:], inv(step), 8)
				q := uint16(iq2xsLookup.nearest(v[:])) | uint16(evenSignBits(x[e:])&127)<<9
				put16(b[2+8*s+2*l:], q)
			}
		}
	}
}

// quantizeIQ2S: as IQ2_XS with a 10-bit grid index and 8 free signs.
func quantizeIQ2S(x []float32, b []byte) {
	want, mx := halfScales(x)
	hd := F32ToF16(mx / 3.875)
	put16(b, hd)
	d := F16ToF32(hd)
	for s := 0; s < 8; s++ {
		b[66+s], b[74+s] = 0, 0
		for h := 0; h < 2; h++ {
			ls, step := iq2Step(want[2*s+h], d)
			b[74+s] |= byte(ls) << (4 * h)
			for l := 2 * h; l < 2*h+2; l++ {
				e := 32*s + 8*l
				v := magnitudes(x[e:], inv(step), 8)
				idx := iq2sLookup.nearest(v[:])
				b[2+4*s+l] = byte(idx)
				b[66+s] |= byte(idx>>8) << (2 * l)
				b[34+4*s+l] = signBits(x[e:])
			}
		}
	}
}
