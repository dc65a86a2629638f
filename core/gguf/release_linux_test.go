package gguf

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/quant"
)

// mappingRSS is the resident kB of the mapping that holds b, from
// /proc/self/smaps.
func mappingRSS(t *testing.T, b []byte) int {
	t.Helper()
	fd, err := os.Open("/proc/self/smaps")
	require.NoError(t, err)
	defer fd.Close()
	at := uintptr(unsafe.Pointer(&b[0]))
	in := false
	sc := bufio.NewScanner(fd)
	for sc.Scan() {
		line := sc.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x", &lo, &hi); n == 2 && strings.Contains(line, " ") {
			in = lo <= at && at < hi
			continue
		}
		var kb int
		if in && strings.HasPrefix(line, "Rss:") {
			_, err := fmt.Sscanf(line, "Rss: %d kB", &kb)
			require.NoError(t, err)
			return kb
		}
	}
	t.Fatal("mapping not found in /proc/self/smaps")
	return 0
}

// TestReleaseDropsPagesKeepsData: after Release, a tensor's pages no
// longer count in the process's resident memory, and reading it again
// gives the same bytes (from the page cache). A File from Parse keeps its
// bytes: Release must never discard memory that is not a file's.
func TestReleaseDropsPagesKeepsData(t *testing.T) {
	payload := make([]byte, 8<<20)
	for i := range payload {
		payload[i] = byte(i*7 + i>>12)
	}
	w := NewWriter()
	require.NoError(t, w.AddTensor("big", quant.F32, []int{len(payload) / 4}, payload))
	var buf bytes.Buffer
	_, err := w.WriteTo(&buf)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "big.gguf")
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))

	f, err := Open(path)
	require.NoError(t, err)
	defer f.Close()
	data := f.Tensors[0].Data
	require.Equal(t, payload, data) // every page read in
	require.GreaterOrEqual(t, mappingRSS(t, data), 8<<10)
	f.Release(data)
	require.LessOrEqual(t, mappingRSS(t, data), 16, "kB left resident: the header and the partial edge pages")
	require.Equal(t, payload, data)

	p, err := Parse(buf.Bytes())
	require.NoError(t, err)
	p.Release(p.Tensors[0].Data)
	require.Equal(t, payload, p.Tensors[0].Data)
}
