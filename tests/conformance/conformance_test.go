// Package conformance runs the stream-contract vectors of this directory
// against the Go runtime with the replay backend. The C test program and the
// Python and Elixir suites run the same files through their own layers.
package conformance

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/loop"
	_ "github.com/lmstream/lmstream/core/replay"
	"github.com/lmstream/lmstream/core/status"
	"github.com/lmstream/lmstream/streaming"
)

// Vector is one conformance case (see generate.py for the schema).
type Vector struct {
	Name     string          `json:"name"`
	Runtime  json.RawMessage `json:"runtime"`
	Request  json.RawMessage `json:"request"`
	Channel  ChannelSettings `json:"channel"`
	Consumer struct {
		CancelAfterChunks *int `json:"cancel_after_chunks"`
		DrainAfterFinish  bool `json:"drain_after_finish"`
	} `json:"consumer"`
	Expect            []Expect `json:"expect"`
	ExpectSubmitError string   `json:"expect_submit_error"`
}

type ChannelSettings struct {
	Interval    int    `json:"interval"`
	SkipSpecial *bool  `json:"skip_special"`
	QueueLimit  int    `json:"queue_limit"`
	Policy      string `json:"policy"`
}

type Expect struct {
	Chunks    []ExpectChunk `json:"chunks"`
	Text      string        `json:"text"`
	TokenIDs  []int32       `json:"token_ids"`
	Reason    string        `json:"reason"`
	ErrorCode int32         `json:"error_code"`
	MaxChunks int           `json:"max_chunks"`
}

type ExpectChunk struct {
	TokenIDs  []int32 `json:"token_ids"`
	Text      string  `json:"text"`
	Finished  bool    `json:"finished"`
	Reason    string  `json:"reason"`
	ErrorCode int32   `json:"error_code"`
}

func loadVectors(t *testing.T) map[string]*Vector {
	files, err := filepath.Glob("*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	out := map[string]*Vector{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		v := &Vector{}
		require.NoError(t, json.Unmarshal(data, v), f)
		out[f] = v
	}
	return out
}

// requestBytes is the request as sent: a JSON string in the vector is sent
// verbatim (to test malformed JSON), anything else is re-encoded.
func requestBytes(raw json.RawMessage) []byte {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []byte(s)
	}
	return raw
}

func TestVectors(t *testing.T) {
	vectors := loadVectors(t)
	names := make([]string, 0, len(vectors))
	for f := range vectors {
		names = append(names, f)
	}
	sort.Strings(names)
	for _, f := range names {
		v := vectors[f]
		t.Run(f, func(t *testing.T) {
			t.Parallel()
			runVector(t, v)
		})
	}
}

func runVector(t *testing.T, v *Vector) {
	rt, err := loop.New(v.Runtime)
	require.NoError(t, err)
	defer rt.Close()

	n := max(len(v.Expect), 1)
	chans := make([]*streaming.Channel, n)
	for i := range chans {
		ch := streaming.NewChannel()
		defer ch.Release()
		require.NoError(t, ch.SetInterval(v.Channel.Interval))
		if v.Channel.SkipSpecial != nil {
			require.NoError(t, ch.SetSkipSpecial(*v.Channel.SkipSpecial))
		}
		if v.Channel.QueueLimit > 0 {
			p := streaming.Coalesce
			if v.Channel.Policy == "pause" {
				p = streaming.Pause
			}
			require.NoError(t, ch.SetQueue(v.Channel.QueueLimit, p))
		}
		chans[i] = ch
	}
	err = rt.Submit(requestBytes(v.Request), chans)
	if v.ExpectSubmitError != "" {
		require.Error(t, err)
		require.Equal(t, v.ExpectSubmitError, status.CodeOf(err).Ident(), err.Error())
		t.Log(err)
		return
	}
	require.NoError(t, err)

	for i, ch := range chans {
		exp := v.Expect[i]
		if v.Consumer.DrainAfterFinish {
			deadline := time.Now().Add(10 * time.Second)
			for {
				if fin, _ := ch.Finished(); fin {
					break
				}
				require.True(t, time.Now().Before(deadline), "stream did not finish")
				time.Sleep(time.Millisecond)
			}
		}
		var got []streaming.Chunk
		for {
			c, err := ch.WaitPop(10 * time.Second)
			require.NoError(t, err, "after %d chunks", len(got))
			got = append(got, c)
			if c.Finished {
				break
			}
			if v.Consumer.CancelAfterChunks != nil && len(got) == *v.Consumer.CancelAfterChunks {
				ch.Cancel()
			}
		}
		_, err := ch.TryPop()
		require.ErrorIs(t, err, streaming.ErrDone, "nothing may follow the terminal chunk")
		CheckChunks(t, exp, got)
	}
}

// CheckChunks compares received chunks with the expectation and checks the
// invariants that hold for every stream.
func CheckChunks(t *testing.T, exp Expect, got []streaming.Chunk) {
	t.Helper()
	var text string
	var ids []int32
	for i, c := range got {
		require.True(t, utf8.ValidString(c.Text), "I1: chunk %d is not UTF-8: %q", i, c.Text)
		require.Equal(t, i == len(got)-1, c.Finished, "I3: exactly the last chunk is terminal")
		text += c.Text
		ids = append(ids, c.TokenIDs...)
	}
	last := got[len(got)-1]
	require.Equal(t, exp.Reason, last.Reason.String())
	require.Equal(t, exp.ErrorCode, last.ErrCode, last.ErrMessage)
	require.Equal(t, exp.Text, text, "I2: concatenated text")
	require.Equal(t, exp.TokenIDs, nonNil(ids), "I4: concatenated token ids")
	if exp.MaxChunks > 0 {
		require.LessOrEqual(t, len(got), exp.MaxChunks, "queue limit bounds the chunks")
	}
	if exp.Chunks != nil {
		gotChunks := make([]ExpectChunk, len(got))
		for i, c := range got {
			gotChunks[i] = ExpectChunk{TokenIDs: nonNil(c.TokenIDs), Text: c.Text, Finished: c.Finished, ErrorCode: c.ErrCode}
			if c.Finished {
				gotChunks[i].Reason = c.Reason.String()
			}
		}
		want := make([]ExpectChunk, len(exp.Chunks))
		for i, c := range exp.Chunks {
			want[i] = c
			want[i].TokenIDs = nonNil(c.TokenIDs)
		}
		require.Equal(t, want, gotChunks, "chunk sequence")
	}
}

func nonNil(ids []int32) []int32 {
	if ids == nil {
		return []int32{}
	}
	return ids
}

// The committed vectors must be what generate.py writes.
func TestVectorsUpToDate(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not on PATH")
	}
	out, err := exec.Command(py, "generate.py", "--check").CombinedOutput()
	require.NoError(t, err, "%s", out)
}

// TestRandomStreams runs random vocabularies, bursts, stop sets, intervals
// and limits through the runtime, with the expected chunks computed by
// generate.py's oracle. LMSTREAM_RANDOM_SEED picks another seed; the count
// grows with LMSTREAM_RANDOM_COUNT (make fuzz runs more).
func TestRandomStreams(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not on PATH")
	}
	seed, count := "20261122", "400"
	if s := os.Getenv("LMSTREAM_RANDOM_SEED"); s != "" {
		seed = s
	}
	if c := os.Getenv("LMSTREAM_RANDOM_COUNT"); c != "" {
		count = c
	}
	out, err := exec.Command(py, "generate.py", "--random", count, seed).Output()
	require.NoError(t, err)
	var vectors []*Vector
	require.NoError(t, json.Unmarshal(out, &vectors))
	t.Logf("%d random vectors, seed %s", len(vectors), seed)
	for _, v := range vectors {
		t.Run(v.Name, func(t *testing.T) {
			t.Parallel()
			runVector(t, v)
		})
	}
}
