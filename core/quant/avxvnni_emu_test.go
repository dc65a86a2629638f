//go:build amd64 && !noasm

package quant

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// An emulator for the 8-row kernels' text in packed8_amd64.s: the AVX-VNNI
// kernels (gen_packed8_avxvnni.go) cannot run on a CPU without AVX-VNNI,
// which is most of the machines CI and development run on, so this test
// runs their instructions one by one in Go. The emulator knows the
// instructions the AVX2 and AVX-VNNI 8-row kernels use and nothing else;
// it proves itself on the AVX2 kernels first (its results must be the
// hardware's, bit for bit), then runs the AVX-VNNI kernels, whose
// VPDPBUSD it decodes from the bytes the generator wrote.

// emuProgram is the parsed assembly file: its functions and its DATA.
type emuProgram struct {
	funcs map[string]*emuFunc
	data  map[string][]byte // RODATA symbols, name without <>
}

type emuFunc struct {
	code   []emuInstr
	labels map[string]int
	frame  int
}

type emuInstr struct {
	op   string
	args []emuOperand
	vex  []byte // op "VEX": the encoded instruction
	line string
}

// emuOperand is a register (reg), an immediate (imm, isImm), a label or
// memory: off + base + index·scale, base a register, "SP", "FP" or a
// symbol (sym).
type emuOperand struct {
	reg          string
	imm          int64
	isImm, isMem bool
	base, index  string
	scale        int64
	off          int64
	sym, label   string
}

// parseEmuProgram parses the DATA of the file at path and the functions
// whose names want accepts.
func parseEmuProgram(t *testing.T, path string, want func(name string) bool) *emuProgram {
	src, err := os.ReadFile(path)
	require.NoError(t, err)
	p := &emuProgram{funcs: map[string]*emuFunc{}, data: map[string][]byte{}}
	var cur *emuFunc
	for _, line := range strings.Split(string(src), "\n") {
		switch {
		case strings.HasPrefix(line, "DATA "):
			// DATA name<>+off(SB)/size, $value
			var name string
			var off, size int
			var val uint64
			f := strings.Fields(strings.NewReplacer("<>+", " ", "(SB)/", " ", ",", " ", "$", " ").Replace(line))
			name = f[1]
			off, _ = strconv.Atoi(f[2])
			size, _ = strconv.Atoi(f[3])
			val, err = strconv.ParseUint(f[4], 0, 64)
			require.NoError(t, err, line)
			for len(p.data[name]) < off+size {
				p.data[name] = append(p.data[name], 0)
			}
			for i := 0; i < size; i++ {
				p.data[name][off+i] = byte(val >> (8 * i))
			}
		case strings.HasPrefix(line, "TEXT ·"):
			name := line[len("TEXT ·"):strings.Index(line, "(SB)")]
			fs := line[strings.LastIndex(line, "$")+1:]
			frame, _ := strconv.Atoi(fs[:strings.Index(fs, "-")])
			cur = nil
			if want(name) {
				cur = &emuFunc{labels: map[string]int{}, frame: frame}
				p.funcs[name] = cur
			}
		case cur == nil || line == "" || strings.HasPrefix(line, "//") || strings.HasPrefix(line, "GLOBL"):
		case !strings.HasPrefix(line, "\t") && strings.HasSuffix(line, ":"):
			cur.labels[strings.TrimSuffix(line, ":")] = len(cur.code)
		default:
			cur.code = append(cur.code, parseEmuInstr(t, strings.TrimSpace(line)))
		}
	}
	return p
}

func parseEmuInstr(t *testing.T, line string) emuInstr {
	if strings.HasPrefix(line, "BYTE ") {
		in := emuInstr{op: "VEX", line: line}
		code, _, _ := strings.Cut(line, "//")
		for _, b := range strings.Split(code, ";") {
			v, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(b), "BYTE $"), 0, 8)
			require.NoError(t, err, line)
			in.vex = append(in.vex, byte(v))
		}
		return in
	}
	code, _, _ := strings.Cut(line, "//")
	op, rest, _ := strings.Cut(strings.TrimSpace(code), " ")
	in := emuInstr{op: op, line: line}
	if rest = strings.TrimSpace(rest); rest == "" {
		return in
	}
	for _, a := range strings.Split(rest, ", ") {
		in.args = append(in.args, parseEmuOperand(t, a))
	}
	return in
}

func parseEmuOperand(t *testing.T, a string) emuOperand {
	switch {
	case strings.HasPrefix(a, "$"):
		v, err := strconv.ParseInt(a[1:], 0, 64)
		require.NoError(t, err, a)
		return emuOperand{imm: v, isImm: true}
	case !strings.Contains(a, "("):
		if a[0] >= 'a' && a[0] <= 'z' || strings.HasSuffix(a, "loop") || strings.HasSuffix(a, "group") {
			return emuOperand{label: a}
		}
		return emuOperand{reg: a}
	case strings.HasSuffix(a, "(SB)"):
		return emuOperand{isMem: true, sym: strings.TrimSuffix(a, "<>(SB)")}
	case strings.HasSuffix(a, "(FP)"):
		_, off, _ := strings.Cut(strings.TrimSuffix(a, "(FP)"), "+")
		v, err := strconv.ParseInt(off, 10, 64)
		require.NoError(t, err, a)
		return emuOperand{isMem: true, base: "FP", off: v}
	}
	o := emuOperand{isMem: true}
	i := strings.Index(a, "(")
	if i > 0 {
		v, err := strconv.ParseInt(a[:i], 10, 64)
		require.NoError(t, err, a)
		o.off = v
	}
	parts := strings.Split(strings.TrimSuffix(a[i+1:], ")"), ")(")
	o.base = parts[0]
	if len(parts) == 2 {
		idx, sc, _ := strings.Cut(parts[1], "*")
		o.index = idx
		o.scale, _ = strconv.ParseInt(sc, 10, 64)
	}
	return o
}

// emuMachine runs one emuFunc. Memory is a set of regions, each at a fake
// address of its own (region i from (i+1)<<32), so that the emulated
// kernel's pointers are plain numbers and no Go pointer is forged.
type emuMachine struct {
	p       *emuProgram
	y       [16][32]byte
	gpr     map[string]uint64
	zf      bool
	regions [][]byte
	symAddr map[string]uint64
}

func newEmuMachine(p *emuProgram) *emuMachine {
	m := &emuMachine{p: p, gpr: map[string]uint64{}, symAddr: map[string]uint64{}}
	for name, b := range p.data {
		m.symAddr[name] = m.region(b)
	}
	return m
}

// region maps b into the address space and returns its address.
func (m *emuMachine) region(b []byte) uint64 {
	m.regions = append(m.regions, b)
	return uint64(len(m.regions)) << 32
}

func (m *emuMachine) bytes(addr uint64, n int) []byte {
	r := int(addr>>32) - 1
	off := int(addr & (1<<32 - 1))
	if r < 0 || r >= len(m.regions) || off+n > len(m.regions[r]) {
		panic(fmt.Sprintf("emulator: access of %d bytes at %#x out of bounds", n, addr))
	}
	return m.regions[r][off : off+n]
}

func (m *emuMachine) addr(o emuOperand) uint64 {
	if o.sym != "" {
		a, ok := m.symAddr[o.sym]
		if !ok {
			panic("emulator: no symbol " + o.sym)
		}
		return a
	}
	a := m.gpr[o.base] + uint64(o.off)
	if o.index != "" {
		a += m.gpr[o.index] * uint64(o.scale)
	}
	return a
}

func ymm(name string) int {
	n, err := strconv.Atoi(name[1:])
	if err != nil || (name[0] != 'Y' && name[0] != 'X') || n > 15 {
		panic("emulator: not a vector register: " + name)
	}
	return n
}

// vec reads a vector operand: a register or 32 (n) bytes of memory.
func (m *emuMachine) vec(o emuOperand, n int) [32]byte {
	var v [32]byte
	if o.isMem {
		copy(v[:], m.bytes(m.addr(o), n))
		return v
	}
	return m.y[ymm(o.reg)]
}

func (m *emuMachine) gval(o emuOperand) uint64 {
	switch {
	case o.isImm:
		return uint64(o.imm)
	case o.isMem:
		return binary.LittleEndian.Uint64(m.bytes(m.addr(o), 8))
	}
	return m.gpr[o.reg]
}

// Lane views of a 32-byte vector.
func u16s(v [32]byte) (w [16]uint16) {
	for i := range w {
		w[i] = binary.LittleEndian.Uint16(v[2*i:])
	}
	return
}

func u32s(v [32]byte) (d [8]uint32) {
	for i := range d {
		d[i] = binary.LittleEndian.Uint32(v[4*i:])
	}
	return
}

func f32s8(v [32]byte) (f [8]float32) {
	for i, d := range u32s(v) {
		f[i] = math.Float32frombits(d)
	}
	return
}

func from16(w [16]uint16) (v [32]byte) {
	for i, x := range w {
		binary.LittleEndian.PutUint16(v[2*i:], x)
	}
	return
}

func from32(d [8]uint32) (v [32]byte) {
	for i, x := range d {
		binary.LittleEndian.PutUint32(v[4*i:], x)
	}
	return
}

func fromF32(f [8]float32) (v [32]byte) {
	var d [8]uint32
	for i, x := range f {
		d[i] = math.Float32bits(x)
	}
	return from32(d)
}

func sat16(v int32) uint16 { return uint16(int16(max(-32768, min(32767, v)))) }

// fma32 is a·b + c rounded once to float32, as VFMADD…PS.
func fma32(a, b, c float32) float32 {
	x := new(big.Float).SetPrec(1024).SetFloat64(float64(a))
	x.Mul(x, new(big.Float).SetPrec(1024).SetFloat64(float64(b)))
	x.Add(x, new(big.Float).SetPrec(1024).SetFloat64(float64(c)))
	r, _ := new(big.Float).SetPrec(24).SetMode(big.ToNearestEven).Set(x).Float32()
	return r
}

// decodeVEX decodes a VEX-encoded VPDPBUSD ymm, ymm, ymm (the only VEX
// instruction the generator writes as bytes) into Go's operand order:
// dst += src1 (unsigned bytes) · src2 (signed bytes).
func decodeVEX(b []byte) (src2, src1, dst int, err error) {
	if len(b) != 5 || b[0] != 0xc4 || b[1]&0x5f != 0x42 || b[2]&0x87 != 0x05 || b[3] != 0x50 || b[4]&0xc0 != 0xc0 {
		return 0, 0, 0, fmt.Errorf("not a VEX.256.66.0F38.W0 50 register form: % x", b)
	}
	r := int(^b[1]>>7) & 1
	bb := int(^b[1]>>5) & 1
	src1 = int(^b[2]>>3) & 15
	dst = r<<3 | int(b[4]>>3)&7
	src2 = bb<<3 | int(b[4])&7
	return src2, src1, dst, nil
}

// call runs function name with the 8-byte argument words args.
func (m *emuMachine) call(name string, args []uint64) {
	f := m.p.funcs[name]
	if f == nil {
		panic("emulator: no function " + name)
	}
	argb := make([]byte, 8*len(args))
	for i, a := range args {
		binary.LittleEndian.PutUint64(argb[8*i:], a)
	}
	m.gpr["FP"] = m.region(argb)
	m.gpr["SP"] = m.region(make([]byte, max(f.frame, 8)))
	for pc := 0; pc < len(f.code); pc++ {
		in := f.code[pc]
		a := in.args
		// Go operand order: sources first, the destination last.
		v3 := func(op func(x, y [32]byte) [32]byte) {
			m.y[ymm(a[len(a)-1].reg)] = op(m.vec(a[1], 32), m.vec(a[0], 32))
		}
		shift := func(op func(x [32]byte, n uint) [32]byte) {
			m.y[ymm(a[2].reg)] = op(m.vec(a[1], 32), uint(a[0].imm))
		}
		switch in.op {
		case "MOVQ":
			m.gpr[a[1].reg] = m.gval(a[0])
		case "LEAQ":
			m.gpr[a[1].reg] = m.addr(a[0])
		case "ADDQ":
			m.gpr[a[1].reg] += m.gval(a[0])
		case "DECQ":
			var v uint64
			if a[0].isMem {
				b := m.bytes(m.addr(a[0]), 8)
				v = binary.LittleEndian.Uint64(b) - 1
				binary.LittleEndian.PutUint64(b, v)
			} else {
				m.gpr[a[0].reg]--
				v = m.gpr[a[0].reg]
			}
			m.zf = v == 0
		case "JNZ":
			if !m.zf {
				pc = f.labels[a[0].label] - 1
			}
		case "PREFETCHT0", "VZEROUPPER":
		case "RET":
			return
		case "VMOVDQU", "VMOVUPS", "VMOVDQA":
			switch {
			case a[1].isMem:
				copy(m.bytes(m.addr(a[1]), 32), m.y[ymm(a[0].reg)][:])
			case a[1].reg[0] == 'X':
				v := m.vec(a[0], 16)
				clear(v[16:])
				m.y[ymm(a[1].reg)] = v
			default:
				m.y[ymm(a[1].reg)] = m.vec(a[0], 32)
			}
		case "VPBROADCASTD", "VBROADCASTSS":
			s := m.vec(a[0], 4)
			var v [32]byte
			for i := 0; i < 8; i++ {
				copy(v[4*i:], s[:4])
			}
			m.y[ymm(a[1].reg)] = v
		case "VCVTPH2PS":
			s := m.vec(a[0], 16)
			var f [8]float32
			for i := range f {
				f[i] = F16ToF32(binary.LittleEndian.Uint16(s[2*i:]))
			}
			m.y[ymm(a[1].reg)] = fromF32(f)
		case "VCVTDQ2PS":
			var f [8]float32
			for i, d := range u32s(m.vec(a[0], 32)) {
				f[i] = float32(int32(d))
			}
			m.y[ymm(a[1].reg)] = fromF32(f)
		case "VPABSB":
			v := m.vec(a[0], 32)
			for i := range v {
				if int8(v[i]) < 0 {
					v[i] = byte(-int8(v[i]))
				}
			}
			m.y[ymm(a[1].reg)] = v
		case "VPAND", "VPOR", "VPXOR", "VXORPS":
			v3(func(x, y [32]byte) (z [32]byte) {
				for i := range z {
					switch in.op {
					case "VPAND":
						z[i] = x[i] & y[i]
					case "VPOR":
						z[i] = x[i] | y[i]
					default:
						z[i] = x[i] ^ y[i]
					}
				}
				return
			})
		case "VPSRLW", "VPSLLW", "VPSRAW":
			shift(func(x [32]byte, n uint) [32]byte {
				w := u16s(x)
				for i := range w {
					switch {
					case in.op == "VPSRLW":
						w[i] >>= n
					case in.op == "VPSLLW":
						w[i] <<= n
					default:
						w[i] = uint16(int16(w[i]) >> n)
					}
				}
				return from16(w)
			})
		case "VPSRLD", "VPSLLD", "VPSRAD":
			shift(func(x [32]byte, n uint) [32]byte {
				d := u32s(x)
				for i := range d {
					switch {
					case in.op == "VPSRLD":
						d[i] >>= n
					case in.op == "VPSLLD":
						d[i] <<= n
					default:
						d[i] = uint32(int32(d[i]) >> n)
					}
				}
				return from32(d)
			})
		case "VPADDW", "VPSUBW":
			v3(func(x, y [32]byte) [32]byte {
				xw, yw := u16s(x), u16s(y)
				for i := range xw {
					if in.op == "VPADDW" {
						xw[i] += yw[i]
					} else {
						xw[i] -= yw[i]
					}
				}
				return from16(xw)
			})
		case "VPADDD", "VPMULLD":
			v3(func(x, y [32]byte) [32]byte {
				xd, yd := u32s(x), u32s(y)
				for i := range xd {
					if in.op == "VPADDD" {
						xd[i] += yd[i]
					} else {
						xd[i] = uint32(int32(xd[i]) * int32(yd[i]))
					}
				}
				return from32(xd)
			})
		case "VPMADDUBSW": // x: the unsigned bytes, y: the signed ones
			v3(func(x, y [32]byte) (z [32]byte) {
				var w [16]uint16
				for i := range w {
					w[i] = sat16(int32(x[2*i])*int32(int8(y[2*i])) + int32(x[2*i+1])*int32(int8(y[2*i+1])))
				}
				return from16(w)
			})
		case "VPMADDWD":
			v3(func(x, y [32]byte) [32]byte {
				xw, yw := u16s(x), u16s(y)
				var d [8]uint32
				for i := range d {
					d[i] = uint32(int32(int16(xw[2*i]))*int32(int16(yw[2*i])) + int32(int16(xw[2*i+1]))*int32(int16(yw[2*i+1])))
				}
				return from32(d)
			})
		case "VPSIGNB": // x negated where y < 0, zeroed where y = 0
			v3(func(x, y [32]byte) (z [32]byte) {
				for i := range z {
					switch {
					case int8(y[i]) < 0:
						z[i] = byte(-int8(x[i]))
					case y[i] != 0:
						z[i] = x[i]
					}
				}
				return
			})
		case "VPSHUFB": // x the data, y the control, within each 128-bit half
			v3(func(x, y [32]byte) (z [32]byte) {
				for i := range z {
					if y[i]&0x80 == 0 {
						z[i] = x[i&^15+int(y[i]&15)]
					}
				}
				return
			})
		case "VMULPS", "VADDPS":
			v3(func(x, y [32]byte) [32]byte {
				xf, yf := f32s8(x), f32s8(y)
				for i := range xf {
					if in.op == "VMULPS" {
						xf[i] *= yf[i]
					} else {
						xf[i] += yf[i]
					}
				}
				return fromF32(xf)
			})
		case "VFMADD231PS", "VFNMADD231PS", "VFMADD213PS":
			d := ymm(a[2].reg)
			x, y, acc := f32s8(m.vec(a[1], 32)), f32s8(m.vec(a[0], 32)), f32s8(m.y[d])
			for i := range acc {
				switch in.op {
				case "VFMADD231PS": // acc = x·y + acc
					acc[i] = fma32(x[i], y[i], acc[i])
				case "VFNMADD231PS": // acc = −(x·y) + acc
					acc[i] = fma32(-x[i], y[i], acc[i])
				default: // acc = x·acc + y
					acc[i] = fma32(x[i], acc[i], y[i])
				}
			}
			m.y[d] = fromF32(acc)
		case "VEX":
			s2, s1, d, err := decodeVEX(in.vex)
			if err != nil {
				panic(err)
			}
			u, s, acc := m.y[s1], m.y[s2], u32s(m.y[d])
			for l := range acc {
				for i := 0; i < 4; i++ {
					acc[l] += uint32(int32(u[4*l+i]) * int32(int8(s[4*l+i])))
				}
			}
			m.y[d] = from32(acc)
		default:
			panic("emulator: unknown instruction: " + in.line)
		}
	}
}

// TestVEXEncodings: the emulator's decoder against VPDPBUSD encodings
// taken from GNU as 2.40 ({vex} vpdpbusd, AT&T order = Go's order).
func TestVEXEncodings(t *testing.T) {
	for _, c := range []struct {
		b             []byte
		src2, src1, d int
	}{
		{[]byte{0xc4, 0xe2, 0x75, 0x50, 0xc2}, 2, 1, 0},
		{[]byte{0xc4, 0x42, 0x35, 0x50, 0xe5}, 13, 9, 12},
	} {
		s2, s1, d, err := decodeVEX(c.b)
		require.NoError(t, err)
		require.Equal(t, []int{c.src2, c.src1, c.d}, []int{s2, s1, d}, "% x", c.b)
	}
}

// emuCall runs 8-row kernel name (the signature of p8Asm's kernels) in
// the emulator over wp, x, sc and returns the out floats (na rows of
// 8·ng, row stride 8·ng).
func emuCall(m *emuMachine, name string, wp []byte, nb, ng int, x []byte, xs int, sc []float32, na int) []float32 {
	scb := make([]byte, 4*max(len(sc), 1))
	for i, v := range sc {
		binary.LittleEndian.PutUint32(scb[4*i:], math.Float32bits(v))
	}
	out := make([]byte, 4*na*8*ng)
	m.call(name, []uint64{m.region(wp), uint64(nb), m.region(x), uint64(xs), m.region(scb), uint64(8 * nb), m.region(out), uint64(4 * 8 * ng), uint64(ng)})
	f := make([]float32, na*8*ng)
	for i := range f {
		f[i] = math.Float32frombits(binary.LittleEndian.Uint32(out[4*i:]))
	}
	return f
}

// TestEmulatedAVXVNNI: on every machine with AVX2, the AVX2 8-row kernels
// run on the emulator give the hardware's bits (the emulator's check),
// and the AVX-VNNI kernels run on it give the same bits as the AVX2
// kernels, for every type, every na and raw random blocks over two
// groups. Where the CPU has AVX-VNNI, TestPacked8AVXVNNIEqualsAVX2 runs
// them for real.
func TestEmulatedAVXVNNI(t *testing.T) {
	if !hasAVX2() {
		t.Skip("the CPU lacks AVX2 (the reference)")
	}
	p := parseEmuProgram(t, "packed8_amd64.s", func(name string) bool {
		return strings.Contains(name, "P8x") || strings.Contains(name, "P8Xx")
	})
	rng := rand.New(rand.NewPCG(51, 52))
	var avx2 kernelSet
	installPacked8(&avx2, p8Asm)
	names := map[Type][2]string{
		Q4_0: {"q40P8", "q40P8X"}, Q4_1: {"q41P8", "q41P8X"}, Q5_0: {"q50P8", "q50P8X"},
		Q8_0: {"q80P8", "q80P8X"}, Q4_K: {"q4kP8", "q4kP8X"}, Q6_K: {"q6kP8", "q6kP8X"},
	}
	for wt, nm := range names {
		const ng, acts = 2, 4
		nb := 2
		if wt.BlockElems() == 32 {
			nb = 3
		}
		cols := nb * wt.BlockElems()
		w := randBlocks(rng, wt, ng*p8Rows*nb)
		wrb, _ := wt.RowBytes(cols)
		gb := nb * p8Record(wt)
		wp := make([]byte, ng*gb)
		for g := 0; g < ng; g++ {
			pack8Go(wt, w, wrb, ng*p8Rows, cols, g, wp[g*gb:])
		}
		at := ActType(wt)
		xrb, _ := at.RowBytes(cols)
		xq := make([]byte, acts*xrb)
		QuantizeActs(at, randFloats(rng, acts*cols, 1), acts, cols, xq)
		var sc []float32
		if p8Legacy(wt) {
			sc = make([]float32, acts*nb*2)
			for j := 0; j < acts; j++ {
				p8Scales(wt, xq[j*xrb:], nb, sc[j*nb*2:])
			}
		}
		for na := 1; na <= acts; na++ {
			hw := make([]float32, na*8*ng)
			avx2.p8[wt](wp, nb, ng, xq, xrb, sc, hw, 8*ng, na)
			m := newEmuMachine(p)
			emu := emuCall(m, fmt.Sprintf("%sx%d", nm[0], na), wp, nb, ng, xq, xrb, sc, na)
			vex := emuCall(m, fmt.Sprintf("%sx%d", nm[1], na), wp, nb, ng, xq, xrb, sc, na)
			for i := range hw {
				require.Equal(t, math.Float32bits(hw[i]), math.Float32bits(emu[i]), "%s na=%d lane %d: the emulated AVX2 kernel %g, the CPU %g", wt, na, i, emu[i], hw[i])
				require.Equal(t, math.Float32bits(hw[i]), math.Float32bits(vex[i]), "%s na=%d lane %d: the emulated AVX-VNNI kernel %g, AVX2 %g", wt, na, i, vex[i], hw[i])
			}
		}
	}
}
