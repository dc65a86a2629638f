package engine

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lmstream/lmstream/core/loop"
)

// peerSpecArgs are llama-speculative-simple's drafting flags when
// LMSTREAM_PEER_SPEC_ARGS does not replace them: its classic draft model,
// three tokens a draft. On the 2-core AMX Xeon (llama.cpp 34af94cd9, AVX-512
// build, Qwen2.5-Coder 1.5B/0.5B, code set) three was its fastest: 98 ms a
// token, against 129 with 8 and 156 with 16.
const peerSpecArgs = "--spec-type draft-simple --spec-draft-n-max 3"

// decodedLine is the summary llama-speculative-simple logs at its end.
var decodedLine = regexp.MustCompile(`decoded\s+(\d+) tokens in\s+([0-9.]+) seconds`)

// peerRun is what the peer decoded over a prompt set.
type peerRun struct {
	tokens int
	wall   time.Duration
}

func (r peerRun) msPerToken() float64 {
	return float64(r.wall.Microseconds()) / 1000 / float64(max(1, r.tokens))
}

// peerSpeculation runs llama.cpp's llama-speculative-simple (the binary
// LMSTREAM_PEER_SPEC names, built outside this repository) on every prompt
// of a set, with the benchmark's target and draft models, its threads and
// greedy sampling, and sums the tokens and seconds it reports decoding.
// Each prompt is the text lmstream's engine decodes from (the model's chat
// template, rendered by this backend) so both see the same tokens.
func peerSpeculation(tb testing.TB, bin string, set []string, maxTokens int) peerRun {
	bk, rt := startBench(tb, benchConfig(""))
	texts := make([]string, len(set))
	for i, p := range set {
		text, err := bk.RenderChat([]loop.Message{{Role: "user", Content: p}}, true, nil)
		if err != nil {
			tb.Fatal(err)
		}
		texts[i] = text
	}
	rt.Close()
	dir := tb.TempDir()
	args := strings.Fields(envOr("LMSTREAM_PEER_SPEC_ARGS", peerSpecArgs))
	var run peerRun
	for i, text := range texts {
		file := filepath.Join(dir, fmt.Sprintf("prompt-%d.txt", i))
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			tb.Fatal(err)
		}
		cmd := exec.Command(bin, append([]string{"-m", specBenchModel(), "-md", envOr("LMSTREAM_SPEC_DRAFT", benchModel),
			"-f", file, "-t", strconv.Itoa(benchThreads), "-td", strconv.Itoa(benchThreads), "--temp", "0", "-n", strconv.Itoa(maxTokens), "-c", "2048"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			tb.Fatalf("%s: %v\n%s", bin, err, tail(out, 2000))
		}
		n, wall, err := parseDecoded(out)
		if err != nil {
			tb.Fatalf("%s: %v\n%s", bin, err, tail(out, 2000))
		}
		run.tokens += n
		run.wall += wall
	}
	return run
}

// parseDecoded reads the last "decoded N tokens in S seconds" line of
// llama-speculative-simple's log.
func parseDecoded(log []byte) (int, time.Duration, error) {
	m := decodedLine.FindAllSubmatch(log, -1)
	if len(m) == 0 {
		return 0, 0, fmt.Errorf("no \"decoded N tokens in S seconds\" line")
	}
	last := m[len(m)-1]
	n, err := strconv.Atoi(string(last[1]))
	if err != nil {
		return 0, 0, err
	}
	s, err := strconv.ParseFloat(string(last[2]), 64)
	if err != nil || n <= 0 || s <= 0 {
		return 0, 0, fmt.Errorf("bad decode summary %q", last[0])
	}
	return n, time.Duration(s * float64(time.Second)), nil
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

func TestParseDecoded(t *testing.T) {
	log := []byte("0.14.433.882 I encoded   47 tokens in    1.237 seconds, speed:   37.988 t/s\n" +
		"0.14.433.894 I decoded  132 tokens in   10.738 seconds, speed:   12.292 t/s\n")
	n, wall, err := parseDecoded(log)
	if err != nil || n != 132 || wall != 10738*time.Millisecond {
		t.Fatalf("got %d tokens in %v, %v", n, wall, err)
	}
	// The last summary counts where a log holds two.
	n, _, err = parseDecoded(append([]byte("decoded 5 tokens in 1.0 seconds\n"), log...))
	if err != nil || n != 132 {
		t.Fatalf("got %d, %v", n, err)
	}
	for _, bad := range []string{"", "encoded 47 tokens in 1.2 seconds", "decoded 0 tokens in 1.0 seconds", "decoded 3 tokens in 0 seconds"} {
		if _, _, err := parseDecoded([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
