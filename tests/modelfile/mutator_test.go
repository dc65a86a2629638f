package modelfile

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/gguf"
	"github.com/lmstream/lmstream/core/model/synth"
	"github.com/lmstream/lmstream/core/quant"
	"github.com/lmstream/lmstream/internal/race"
)

// The mutator's knobs. The default is a CI-sized run (well under a minute
// on two busy cores); `make fuzz` sets LMSTREAM_MUTATOR_TRIES for a long
// one. LMSTREAM_MUTATOR_SEED replays a run.
const (
	envTries = "LMSTREAM_MUTATOR_TRIES"
	envSeed  = "LMSTREAM_MUTATOR_SEED"
	// defaultTries is the CI run; realShare of the tries mutate the
	// default model (when present), the rest the small generated one.
	defaultTries = 400
	realShare    = 0.1
	// childLimit is the children's address space. Go reserves a few
	// hundred MB of it at start; the default model needs ~300 MB more.
	// A file that makes the loader reserve more than this has asked for
	// memory it does not describe, which is a bug.
	childLimit = 3 << 30
)

// TestGGUFMutator is issue 10's GGUF mutator. It damages valid model
// files (the default model and a small generated one) in the ways a
// truncated download, a flipped bit or a hostile author would: truncation
// at many offsets, byte flips in the header, metadata and tensor infos,
// huge counts, lengths, dimensions, ids and offsets written into valid
// fields, and wrong types for known keys. Each damaged file is loaded in a
// child process (this binary, re-executed) the way the cpu backend loads a
// model, under an address-space limit and a timeout. The child must exit
// cleanly with an error or load and generate; a signal, a panic, running
// out of memory or a hang is a failure, reported with how to replay it.
func TestGGUFMutator(t *testing.T) {
	if race.Enabled {
		t.Skip("the mutator's children are this binary; under -race its shadow memory cannot live under an address-space limit (make test runs the package without -race too)")
	}
	tries := defaultTries
	if s := os.Getenv(envTries); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err, envTries)
		tries = n
	}
	seed := uint64(1)
	if s := os.Getenv(envSeed); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, envSeed)
		seed = n
	}
	exe, err := os.Executable()
	require.NoError(t, err)

	var sources []*source
	small := newSource(t, "small-q4_1", smallModel(t, quant.Q4_1))
	small2 := newSource(t, "small-f16", smallModel(t, quant.F16))
	sources = append(sources, small, small2)
	var real *source
	if data, err := os.ReadFile(defaultModel); err == nil {
		real = newSource(t, "default", data)
		// Families whose metadata and tensors the default model lacks:
		// experts, attention sinks, YaRN, MXFP4 blocks (gpt-oss), fused
		// projections and LongRoPE factors (Phi-3).
		sources = append(sources, synthSources(t)...)
	} else {
		t.Logf("default model absent (run `make model`), mutating only the generated ones: %v", err)
	}
	// The unmutated sources must load and generate, or the counts below
	// would mean nothing.
	dir := t.TempDir()
	for _, s := range append(sources, real) {
		if s == nil {
			continue
		}
		out := runChild(t, exe, dir, s.data, 120*time.Second)
		require.Equal(t, outcomeGenerated, out.kind, "unmutated %s: %s", s.name, out.detail)
	}

	r := rand.New(rand.NewPCG(seed, 0x6775_6666))
	counts := map[outcome]int{}
	start := time.Now()
	for i := range tries {
		s := sources[r.IntN(len(sources))]
		timeout := 20 * time.Second
		if real != nil && r.Float64() < realShare {
			s, timeout = real, 120*time.Second
		}
		data, what := s.mutate(r)
		out := runChild(t, exe, dir, data, timeout)
		counts[out.kind]++
		if out.kind != outcomeClean && out.kind != outcomeGenerated {
			t.Errorf("try %d (seed %d) %s: %s: %s\n%s", i, seed, s.name, what, out.kind, out.detail)
		}
	}
	t.Logf("GGUF mutator, seed %d, %v: tries %d, clean errors %d, loaded and generated %d, crashes %d, out of memory %d, hangs %d",
		seed, time.Since(start).Round(time.Second), tries, counts[outcomeClean], counts[outcomeGenerated],
		counts[outcomeCrash], counts[outcomeOOM], counts[outcomeHang])
}

type outcome string

const (
	outcomeClean     outcome = "clean error"
	outcomeGenerated outcome = "loaded and generated"
	outcomeCrash     outcome = "crash"
	outcomeOOM       outcome = "out of memory"
	outcomeHang      outcome = "hang"
)

type childResult struct {
	kind   outcome
	detail string
}

// runChild writes data to a file and loads it in a child process.
func runChild(t *testing.T, exe, dir string, data []byte, timeout time.Duration) childResult {
	t.Helper()
	path := filepath.Join(dir, "mutant.gguf")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childFile+"="+path, childAS+"="+strconv.Itoa(childLimit), "GOMAXPROCS=2", "GOTRACEBACK=single")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	detail := tail(stderr.String(), 1500)
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return childResult{outcomeHang, fmt.Sprintf("no exit within %v; %s", timeout, detail)}
	case err == nil:
		return childResult{outcomeGenerated, detail}
	case errors.As(err, &ee):
		ws, _ := ee.Sys().(syscall.WaitStatus)
		switch {
		case ws.Signaled():
			return childResult{outcomeCrash, fmt.Sprintf("killed by %v; %s", ws.Signal(), detail)}
		case ws.ExitStatus() == exitCleanError:
			return childResult{outcomeClean, detail}
		case strings.Contains(detail, "out of memory"):
			return childResult{outcomeOOM, detail}
		}
		return childResult{outcomeCrash, fmt.Sprintf("exit status %d; %s", ws.ExitStatus(), detail)}
	}
	t.Fatalf("running the child: %v", err)
	return childResult{}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// source is a valid GGUF file and a map of its header's fields.
type source struct {
	name       string
	data       []byte
	dataOffset int // where the data section starts
	fields     []field
	sizing     []field // integer metadata the loader sizes things by, and token ids
}

// field is one number of the header: where it is, how wide, what it is.
type field struct {
	off, width int
	kind       fieldKind
	what       string // the key or tensor it belongs to
}

type fieldKind int

const (
	fCount      fieldKind = iota // tensor or metadata count
	fStrLen                      // a key, tensor name or string value length
	fValueType                   // a metadata value's type tag
	fElemType                    // an array's element type
	fArrayLen                    // an array's length
	fInt                         // an integer metadata value (or array element)
	fFloat                       // a float metadata value
	fNDims                       // a tensor's dimension count
	fDim                         // a tensor dimension
	fTensorType                  // a tensor's GGML type
	fTensorOff                   // a tensor's data offset
)

func newSource(t *testing.T, name string, data []byte) *source {
	t.Helper()
	f, err := gguf.Parse(data)
	require.NoError(t, err, name)
	s := &source{name: name, data: data, dataOffset: f.DataOffset}
	s.scan()
	require.NotEmpty(t, s.fields)
	for _, f := range s.fields {
		if f.kind == fInt && (strings.HasPrefix(f.what, "llama.") || strings.HasSuffix(f.what, "_token_id")) {
			s.sizing = append(s.sizing, f)
		}
	}
	require.NotEmpty(t, s.sizing)
	return s
}

// scan walks the (valid) header and records its fields. Of long arrays it
// records the first and last few elements only.
func (s *source) scan() {
	b := s.data
	off := 8 // magic, version
	u32 := func() uint32 { x := binary.LittleEndian.Uint32(b[off:]); off += 4; return x }
	u64 := func() uint64 { x := binary.LittleEndian.Uint64(b[off:]); off += 8; return x }
	add := func(width int, kind fieldKind, what string) {
		s.fields = append(s.fields, field{off: off, width: width, kind: kind, what: what})
	}
	str := func(what string) string {
		add(8, fStrLen, what)
		n := int(u64())
		v := string(b[off : off+n])
		off += n
		return v
	}
	add(8, fCount, "tensor count")
	nt := u64()
	add(8, fCount, "metadata count")
	nkv := u64()
	var value func(key string, typ uint32, record bool)
	value = func(key string, typ uint32, record bool) {
		switch gguf.ValueType(typ) {
		case gguf.TypeString:
			if record {
				str(key)
			} else {
				off += 8 + int(binary.LittleEndian.Uint64(b[off:]))
			}
		case gguf.TypeArray:
			add(4, fElemType, key)
			et := u32()
			add(8, fArrayLen, key)
			n := int(u64())
			for i := range n {
				value(key, et, i < 3 || i >= n-2)
			}
		default:
			w := map[gguf.ValueType]int{gguf.TypeUint8: 1, gguf.TypeInt8: 1, gguf.TypeBool: 1, gguf.TypeUint16: 2, gguf.TypeInt16: 2,
				gguf.TypeUint32: 4, gguf.TypeInt32: 4, gguf.TypeFloat32: 4, gguf.TypeUint64: 8, gguf.TypeInt64: 8, gguf.TypeFloat64: 8}[gguf.ValueType(typ)]
			kind := fInt
			if t := gguf.ValueType(typ); t == gguf.TypeFloat32 || t == gguf.TypeFloat64 {
				kind = fFloat
			}
			if record {
				add(w, kind, key)
			}
			off += w
		}
	}
	for range nkv {
		key := str("key")
		add(4, fValueType, key)
		value(key, u32(), true)
	}
	for range nt {
		name := str("tensor name")
		add(4, fNDims, name)
		nd := int(u32())
		for range nd {
			add(8, fDim, name)
			u64()
		}
		add(4, fTensorType, name)
		u32()
		add(8, fTensorOff, name)
		u64()
	}
}

// Values written into fields: the edges of each width, the sizes that
// break 32-bit arithmetic, and ones near the file's own size.
func (s *source) interesting(r *rand.Rand, width int) uint64 {
	common := []uint64{0, 1, 2, 3, 0x7F, 0xFF, 0x7FFF, 0xFFFF}
	wide := []uint64{1 << 20, 1 << 31, 1<<31 - 1, 1<<32 - 1, 1 << 32, 1<<32 + 2, 1 << 40, 1 << 62, 1 << 63, 1<<64 - 1, 1<<63 - 1,
		uint64(len(s.data)), uint64(len(s.data) - s.dataOffset), uint64(s.dataOffset)}
	pool := common
	if width >= 4 {
		pool = append(pool, wide...)
	}
	x := pool[r.IntN(len(pool))]
	if r.IntN(4) == 0 {
		x = r.Uint64()
	}
	if r.IntN(6) == 0 { // negative as a signed field would read it
		x = -x
	}
	return x
}

// mutate returns a damaged copy of the file and what was done to it.
func (s *source) mutate(r *rand.Rand) ([]byte, string) {
	switch k := r.IntN(10); {
	case k == 7 || k == 8: // a size or id the loader trusts, made huge
		d := append([]byte(nil), s.data...)
		f := s.sizing[r.IntN(len(s.sizing))]
		x := s.interesting(r, f.width)
		put(d[f.off:], f.width, x)
		return d, fmt.Sprintf("%s (%s, %d bytes at byte %d) set to %d", f.what, f.kind, f.width, f.off, x&mask(f.width))
	case k < 2: // truncation: mostly inside the header, where parsing is
		var at int
		switch r.IntN(4) {
		case 0, 1:
			at = r.IntN(s.dataOffset)
		case 2:
			at = s.dataOffset + r.IntN(len(s.data)-s.dataOffset)
		default:
			f := s.fields[r.IntN(len(s.fields))]
			at = f.off + r.IntN(f.width+1)
		}
		return append([]byte(nil), s.data[:at]...), fmt.Sprintf("truncated to %d of %d bytes", at, len(s.data))
	case k < 4: // byte flips: in fields, or anywhere in the header
		d := append([]byte(nil), s.data...)
		n := 1 + r.IntN(4)
		var desc []string
		for range n {
			var at int
			if r.IntN(2) == 0 {
				f := s.fields[r.IntN(len(s.fields))]
				at = f.off + r.IntN(f.width)
			} else {
				at = r.IntN(s.dataOffset)
			}
			x := byte(1 + r.IntN(255))
			d[at] ^= x
			desc = append(desc, fmt.Sprintf("byte %d ^= %#x", at, x))
		}
		return d, "flipped " + strings.Join(desc, ", ")
	case k < 7: // a huge (or tiny) number written into a field of its width
		d := append([]byte(nil), s.data...)
		f := s.pickField(r)
		x := s.interesting(r, f.width)
		put(d[f.off:], f.width, x)
		return d, fmt.Sprintf("%s field of %s at byte %d set to %d (%d bytes)", f.kind, f.what, f.off, x&mask(f.width), f.width)
	default: // a wrong type for a known key
		d := append([]byte(nil), s.data...)
		var types []field
		for _, f := range s.fields {
			if f.kind == fValueType || f.kind == fElemType {
				types = append(types, f)
			}
		}
		f := types[r.IntN(len(types))]
		old := binary.LittleEndian.Uint32(d[f.off:])
		nt := uint32(r.IntN(14)) // 13 is no type at all
		// Same width, different meaning: the layout stays parseable.
		sameWidth := map[uint32][]uint32{0: {1, 7}, 1: {0, 7}, 7: {0, 1}, 2: {3}, 3: {2}, 4: {5, 6}, 5: {4, 6}, 6: {4, 5},
			10: {11, 12}, 11: {10, 12}, 12: {10, 11}}[old]
		if len(sameWidth) > 0 && r.IntN(2) == 0 {
			nt = sameWidth[r.IntN(len(sameWidth))]
		}
		binary.LittleEndian.PutUint32(d[f.off:], nt)
		return d, fmt.Sprintf("type of %s at byte %d changed from %d to %d", f.what, f.off, old, nt)
	}
}

// pickField picks a kind of field, then a field of that kind: most
// fields are string lengths (of the vocabulary), and the others matter
// as much.
func (s *source) pickField(r *rand.Rand) field {
	for {
		k := fieldKind(r.IntN(int(fTensorOff) + 1))
		var of []field
		for _, f := range s.fields {
			if f.kind == k {
				of = append(of, f)
			}
		}
		if len(of) > 0 {
			return of[r.IntN(len(of))]
		}
	}
}

func (k fieldKind) String() string {
	return [...]string{"count", "string length", "value type", "element type", "array length", "integer", "float",
		"dimension count", "dimension", "tensor type", "tensor offset"}[k]
}

func mask(width int) uint64 {
	if width == 8 {
		return 1<<64 - 1
	}
	return 1<<(8*width) - 1
}

func put(b []byte, width int, x uint64) {
	switch width {
	case 1:
		b[0] = byte(x)
	case 2:
		binary.LittleEndian.PutUint16(b, uint16(x))
	case 4:
		binary.LittleEndian.PutUint32(b, uint32(x))
	case 8:
		binary.LittleEndian.PutUint64(b, x)
	}
}

// synthSources are synthetic models (core/model/synth, under the default
// model's vocabulary) of the families with the most metadata and tensors
// of their own.
func synthSources(t *testing.T) []*source {
	t.Helper()
	vocab, err := gguf.Open(defaultModel)
	require.NoError(t, err)
	defer vocab.Close()
	var out []*source
	for _, spec := range synth.Set() {
		if spec.Name != "gpt-oss" && spec.Name != "phi3-longrope" {
			continue
		}
		data, err := synth.Write(spec, vocab)
		require.NoError(t, err, spec.Name)
		out = append(out, newSource(t, spec.Name, data))
	}
	require.Len(t, out, 2, "the synthetic gpt-oss and phi3-longrope specs")
	return out
}
