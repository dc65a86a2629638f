package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/lmstream/lmstream/core/loop"
	_ "github.com/lmstream/lmstream/core/replay"
)

// The replay vocabulary the tests script: 5 and 6 are the two halves of
// 😀 (F0 9F 98 80), 7 and 8 spell "STOP" across two tokens.
const replayConfig = `{"backend": "replay", "max_slots": %d, "eos_id": 0, "special_ids": [0],
  "vocab": ["3c2f733e", "48656c", "6c6f", "20776f72", "6c64", "f09f", "9880", "5354", "4f50", "21"]}`

func newServer(t *testing.T, slots int, opts Options) (*Server, *httptest.Server, *loop.Runtime) {
	t.Helper()
	rt, err := loop.New(fmt.Appendf(nil, replayConfig, slots))
	if err != nil {
		t.Fatal(err)
	}
	s := New(rt, opts)
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() { hs.Close(); rt.Close() })
	return s, hs, rt
}

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// readEvents reads an SSE body to its end, checking the framing: every
// event is one "data: " line and a blank line, and every event's bytes are
// well-formed UTF-8.
func readEvents(t *testing.T, r io.Reader) []string {
	t.Helper()
	br := bufio.NewReader(r)
	var events []string
	for {
		line, err := br.ReadString('\n')
		if err == io.EOF && line == "" {
			return events
		}
		if err != nil {
			t.Fatalf("reading events: %v (after %q)", err, events)
		}
		if !strings.HasPrefix(line, "data: ") {
			t.Fatalf("event line %q does not start with \"data: \"", line)
		}
		blank, err := br.ReadString('\n')
		if err != nil || blank != "\n" {
			t.Fatalf("event %q is not followed by a blank line (got %q, %v)", line, blank, err)
		}
		data := strings.TrimSuffix(strings.TrimPrefix(line, "data: "), "\n")
		if !utf8.ValidString(data) {
			t.Fatalf("event %q is not well-formed UTF-8", data)
		}
		events = append(events, data)
	}
}

type chunk struct {
	Object  string `json:"object"`
	Choices []struct {
		Index        int               `json:"index"`
		Delta        map[string]string `json:"delta"`
		Text         *string           `json:"text"`
		FinishReason *string           `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
	Error *apiError `json:"error"`
}

// stream runs one streaming request and returns its parsed chunks (the
// [DONE] marker checked and dropped) and each choice's text.
func stream(t *testing.T, url, body string) ([]chunk, map[int]string, map[int]string) {
	t.Helper()
	resp := post(t, url, body)
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d, content type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	events := readEvents(t, resp.Body)
	if len(events) == 0 || events[len(events)-1] != "[DONE]" {
		t.Fatalf("stream does not end with [DONE]: %q", events)
	}
	var out []chunk
	texts, reasons := map[int]string{}, map[int]string{}
	for _, e := range events[:len(events)-1] {
		var c chunk
		if err := json.Unmarshal([]byte(e), &c); err != nil {
			t.Fatalf("event %q: %v", e, err)
		}
		if c.Error != nil {
			t.Fatalf("error event %q", e)
		}
		if strings.ContainsRune(e, utf8.RuneError) {
			t.Fatalf("event %q holds U+FFFD: a character was split", e)
		}
		for _, ch := range c.Choices {
			if ch.Text != nil {
				texts[ch.Index] += *ch.Text
			}
			texts[ch.Index] += ch.Delta["content"]
			if ch.FinishReason != nil {
				if _, dup := reasons[ch.Index]; dup {
					t.Fatalf("choice %d finished twice", ch.Index)
				}
				reasons[ch.Index] = *ch.FinishReason
			}
		}
		out = append(out, c)
	}
	return out, texts, reasons
}

func TestChatStreamsInOpenAIShape(t *testing.T) {
	_, hs, _ := newServer(t, 8, Options{})
	chunks, texts, reasons := stream(t, hs.URL+"/v1/chat/completions", `{"model": "m", "stream": true,
		"stream_options": {"include_usage": true}, "messages": [{"role": "user", "content": "hi"}],
		"script": [[1], [2], [3], [4]]}`)
	if texts[0] != "Hello world" || reasons[0] != "stop" {
		t.Fatalf("text %q, finish reason %q", texts[0], reasons[0])
	}
	first := chunks[0].Choices[0].Delta
	if first["role"] != "assistant" {
		t.Fatalf("first delta %v has no assistant role", first)
	}
	last := chunks[len(chunks)-1]
	if last.Usage == nil || len(last.Choices) != 0 || last.Usage.CompletionTokens != 5 || last.Usage.TotalTokens != last.Usage.PromptTokens+5 {
		t.Fatalf("last chunk is not the usage chunk: %+v", last)
	}
	for _, c := range chunks {
		if c.Object != "chat.completion.chunk" {
			t.Fatalf("object %q", c.Object)
		}
	}
}

// "logprobs": true fills each choice's logprobs as OpenAI's chat API
// does: one entry per token with its piece's bytes and top_logprobs, the
// end token left out; streamed with the deltas, or whole. The replay
// backend's tokens are certain (logprob 0).
func TestChatLogprobs(t *testing.T) {
	_, hs, _ := newServer(t, 8, Options{})
	type entry struct {
		Token   string  `json:"token"`
		Logprob float64 `json:"logprob"`
		Bytes   []int   `json:"bytes"`
		Top     []entry `json:"top_logprobs"`
	}
	type logprobs struct {
		Content []entry `json:"content"`
	}
	body := `{"messages": [{"role": "user", "content": "hi"}], "logprobs": true, "top_logprobs": 1,
		"script": [[1, 2], [5], [6], [4]]}`
	check := func(got []entry) {
		t.Helper()
		// A character split over two tokens: each entry has its bytes.
		pieces := []string{"Hel", "lo", "\xf0\x9f", "\x98\x80", "ld"}
		if len(got) != len(pieces) {
			t.Fatalf("%d entries, want %d: %+v", len(got), len(pieces), got)
		}
		for i, e := range got {
			b := make([]byte, len(e.Bytes))
			for k, x := range e.Bytes {
				b[k] = byte(x)
			}
			if string(b) != pieces[i] || e.Logprob != 0 || len(e.Top) != 1 || e.Top[0].Logprob != 0 {
				t.Fatalf("entry %d: %+v", i, e)
			}
		}
	}
	resp := post(t, hs.URL+"/v1/chat/completions", body)
	var whole struct {
		Choices []struct {
			Logprobs *logprobs `json:"logprobs"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&whole); err != nil || resp.StatusCode != 200 || whole.Choices[0].Logprobs == nil {
		t.Fatalf("status %d: %v %+v", resp.StatusCode, err, whole)
	}
	resp.Body.Close()
	check(whole.Choices[0].Logprobs.Content)

	resp = post(t, hs.URL+"/v1/chat/completions", strings.Replace(body, "{", `{"stream": true, `, 1))
	defer resp.Body.Close()
	var streamed []entry
	for _, e := range readEvents(t, resp.Body) {
		if e == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Logprobs *logprobs `json:"logprobs"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(e), &c); err != nil {
			t.Fatal(err)
		}
		if len(c.Choices) > 0 && c.Choices[0].Logprobs != nil {
			streamed = append(streamed, c.Choices[0].Logprobs.Content...)
		}
	}
	check(streamed)

	resp = post(t, hs.URL+"/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "script": [[1]]}`)
	var plain map[string]any
	json.NewDecoder(resp.Body).Decode(&plain)
	resp.Body.Close()
	if lp := plain["choices"].([]any)[0].(map[string]any)["logprobs"]; lp != nil {
		t.Fatalf("logprobs %v nobody asked for", lp)
	}
}

// With include_usage every chunk but the last carries "usage": null, as
// OpenAI's do; without it no chunk has the field.
func TestUsageIsNullOnEveryChunkButTheLast(t *testing.T) {
	_, hs, _ := newServer(t, 8, Options{})
	for _, tc := range []struct{ path, body string }{
		{"/v1/chat/completions", `"messages": [{"role": "user", "content": "hi"}]`},
		{"/v1/completions", `"prompt": "hi"`},
	} {
		for _, include := range []bool{true, false} {
			body := fmt.Sprintf(`{"stream": true, %s, "script": [[1], [2]], "stream_options": {"include_usage": %t}}`, tc.body, include)
			resp := post(t, hs.URL+tc.path, body)
			events := readEvents(t, resp.Body)
			resp.Body.Close()
			if len(events) < 3 || events[len(events)-1] != "[DONE]" {
				t.Fatalf("%s: events %q", tc.path, events)
			}
			chunks := events[:len(events)-1]
			for i, e := range chunks {
				var m map[string]json.RawMessage
				if err := json.Unmarshal([]byte(e), &m); err != nil {
					t.Fatalf("event %q: %v", e, err)
				}
				u, has := m["usage"]
				switch {
				case !include && has:
					t.Fatalf("%s without include_usage: chunk %q has usage", tc.path, e)
				case include && i < len(chunks)-1 && string(u) != "null":
					t.Fatalf("%s: chunk %d %q has usage %s, want null", tc.path, i, e, u)
				case include && i == len(chunks)-1 && !strings.Contains(string(u), `"total_tokens"`):
					t.Fatalf("%s: last chunk %q has no usage", tc.path, e)
				}
			}
		}
	}
}

func TestCompletionStreamEndsWithLength(t *testing.T) {
	_, hs, _ := newServer(t, 8, Options{})
	chunks, texts, reasons := stream(t, hs.URL+"/v1/completions", `{"prompt": "x", "stream": true, "max_tokens": 2,
		"script": [[1], [2], [3], [4]]}`)
	if texts[0] != "Hello" || reasons[0] != "length" {
		t.Fatalf("text %q, finish reason %q", texts[0], reasons[0])
	}
	for _, c := range chunks {
		if c.Object != "text_completion" || c.Usage != nil {
			t.Fatalf("chunk %+v: want text_completion without usage (not asked for)", c)
		}
	}
}

// A character split across two tokens arrives whole in one event, and a
// stop string split across two tokens is cut out whole.
func TestSplitCharacterAndStopStringArriveWhole(t *testing.T) {
	_, hs, _ := newServer(t, 8, Options{})
	chunks, texts, _ := stream(t, hs.URL+"/v1/chat/completions", `{"stream": true, "messages": [{"role": "user", "content": "hi"}],
		"script": [[1], [5], [6], [9]]}`)
	if texts[0] != "Hel😀!" {
		t.Fatalf("text %q", texts[0])
	}
	whole := false
	for _, c := range chunks {
		for _, ch := range c.Choices {
			whole = whole || strings.Contains(ch.Delta["content"], "😀")
		}
	}
	if !whole {
		t.Fatal("no single event carried the emoji whole")
	}
	_, texts, reasons := stream(t, hs.URL+"/v1/chat/completions", `{"stream": true, "stop": ["STOP"],
		"messages": [{"role": "user", "content": "hi"}], "script": [[1], [7], [8], [9]]}`)
	if texts[0] != "Hel" || reasons[0] != "stop" {
		t.Fatalf("text %q, reason %q: the stop string was not cut whole", texts[0], reasons[0])
	}
}

func TestNonStreamingAnswers(t *testing.T) {
	_, hs, _ := newServer(t, 8, Options{ModelID: "tiny"})
	resp := post(t, hs.URL+"/v1/chat/completions", `{"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
		"script": [[1], [5, 6]]}`)
	var chat struct {
		Object  string `json:"object"`
		Model   string `json:"model"`
		Choices []struct {
			Message      map[string]string `json:"message"`
			FinishReason string            `json:"finish_reason"`
		} `json:"choices"`
		Usage map[string]any `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&chat); err != nil || resp.StatusCode != 200 {
		t.Fatalf("status %d: %v", resp.StatusCode, err)
	}
	if chat.Object != "chat.completion" || chat.Model != "tiny" || chat.Choices[0].Message["content"] != "Hel😀" ||
		chat.Choices[0].Message["role"] != "assistant" || chat.Choices[0].FinishReason != "stop" || chat.Usage["completion_tokens"] != 4.0 {
		t.Fatalf("answer %+v", chat)
	}
	// n: one batch item per choice.
	resp = post(t, hs.URL+"/v1/completions", `{"prompt": "x", "n": 3, "script": [[3], [4]]}`)
	var comp struct {
		Object  string `json:"object"`
		Choices []struct {
			Index int    `json:"index"`
			Text  string `json:"text"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&comp); err != nil || resp.StatusCode != 200 {
		t.Fatalf("status %d: %v", resp.StatusCode, err)
	}
	if comp.Object != "text_completion" || len(comp.Choices) != 3 {
		t.Fatalf("answer %+v", comp)
	}
	for i, c := range comp.Choices {
		if c.Index != i || c.Text != " world" {
			t.Fatalf("choice %d: %+v", i, c)
		}
	}
}

func TestBadRequestsGetOpenAIErrors(t *testing.T) {
	_, hs, _ := newServer(t, 8, Options{MaxBodyBytes: 4096})
	chat := hs.URL + "/v1/chat/completions"
	for _, tc := range []struct {
		url, body string
		code      int
		param     string
		says      string
	}{
		{chat, `{"messages": [{"role": "user", "content": "hi"}], "script": [[1]], "logprobs": 1}`, 400, "logprobs", "boolean"},
		{chat, `{"messages": [{"role": "user", "content": "hi"}], "script": [[1]], "logprobs": true, "top_logprobs": 21}`, 400, "top_logprobs", "must be in [0, 20]"},
		{hs.URL + "/v1/completions", `{"prompt": "hi", "script": [[1]], "logprobs": 2}`, 400, "logprobs", "/v1/chat/completions"},
		{chat, `{"messages": [{"role": "user", "content": "hi"}], "script": [[1]], "top_k": "5"}`, 400, "top_k", "integer"},
		{chat, `{"messages": [{"role": "user", "content": "hi"}], "script": [[1]], "temperature": -1}`, 400, "temperature", "must be in"},
		{chat, `{"messages": "hi", "script": [[1]]}`, 400, "messages", "array"},
		{chat, `{"messages": [{"role": "user", "content": "hi"}], "stream": "yes"}`, 400, "stream", "boolean"},
		{chat, `{"messages": [{"role": "user", "content": "hi"}], "stream_options": {"include_usage": true}}`, 400, "stream_options", "stream"},
		{chat, `{"messages": [{"role": "user", "content": "hi"}], "n": 0}`, 400, "n", "must be in"},
		{chat, `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "max_completion_tokens": 3}`, 400, "max_completion_tokens", "not both"},
		{chat, `{"prompt": "hi"}`, 400, "prompt", "messages"},
		{chat, `{"messages": [{"role": "user", "content": "hi"}], "script": [[1]]`, 400, "", "JSON"},
		{chat, `{"messages": [{"role": "user", "content": "hi"}], "messages": []}`, 400, "", "duplicate"},
		{chat, `{"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}`, 400, "messages", "image_url"},
		{hs.URL + "/v1/completions", `{"prompt": [1, 2]}`, 400, "prompt", "string"},
		{chat, `{"messages": [{"role": "user", "content": "` + strings.Repeat("a", 5000) + `"}]}`, 413, "", "larger than 4096"},
		{hs.URL + "/v1/nothing", `{}`, 404, "", "no endpoint"},
	} {
		resp := post(t, tc.url, tc.body)
		var e struct {
			Error *apiError `json:"error"`
		}
		err := json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if err != nil || resp.StatusCode != tc.code || e.Error == nil {
			t.Errorf("%s: status %d (want %d), body error %v", tc.body, resp.StatusCode, tc.code, err)
			continue
		}
		param := ""
		if e.Error.Param != nil {
			param = *e.Error.Param
		}
		if param != tc.param || !strings.Contains(e.Error.Message, tc.says) || e.Error.Type == "" {
			t.Errorf("%.60s: error %+v (param %q), want param %q and a message saying %q", tc.body, e.Error, param, tc.param, tc.says)
		}
	}
}

// waitFor polls cond for up to 5 s: the engine frees a slot on its own
// goroutine, a moment after the request ends.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// slowScript is a stream that would take 100 s: only a cancellation ends
// it within the tests' deadlines.
var slowScript = `"delay_ms": 100, "script": [` + strings.TrimSuffix(strings.Repeat("[3], ", 1000), ", ") + `]`

func TestDisconnectCancelsAndFreesTheSlot(t *testing.T) {
	s, hs, rt := newServer(t, 1, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", hs.URL+"/v1/completions", strings.NewReader(`{"prompt": "x", "stream": true, `+slowScript+`}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || !strings.Contains(line, " wor") {
		t.Fatalf("first event %q, %v", line, err)
	}
	if st := rt.Stats(); st.ActiveSlots != 1 {
		t.Fatalf("stats %+v: the stream holds no slot", st)
	}
	cancel()
	resp.Body.Close()
	waitFor(t, "the slot to be freed", func() bool { return rt.Stats().ActiveSlots == 0 && s.Active() == 0 })
	// The slot is usable at once by the next request.
	_, texts, _ := stream(t, hs.URL+"/v1/completions", `{"prompt": "x", "stream": true, "script": [[1], [2]]}`)
	if texts[0] != "Hello" {
		t.Fatalf("next request got %q", texts[0])
	}
	if st := rt.Stats(); st.Finished != 2 {
		t.Fatalf("stats %+v: want 2 finished", st)
	}
}

func TestTooManyStreamsGet429(t *testing.T) {
	s, hs, _ := newServer(t, 4, Options{MaxStreams: 1, RetryAfter: 3 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", hs.URL+"/v1/completions", strings.NewReader(`{"prompt": "x", "stream": true, `+slowScript+`}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	waitFor(t, "the first stream", func() bool { return s.Active() == 1 })
	busy := post(t, hs.URL+"/v1/completions", `{"prompt": "x", "script": [[1]]}`)
	body, _ := io.ReadAll(busy.Body)
	busy.Body.Close()
	if busy.StatusCode != 429 || busy.Header.Get("Retry-After") != "3" || !bytes.Contains(body, []byte(`"rate_limit_error"`)) {
		t.Fatalf("status %d, Retry-After %q, body %s", busy.StatusCode, busy.Header.Get("Retry-After"), body)
	}
}

func TestManyConcurrentStreamsAllTerminate(t *testing.T) {
	const n = 200
	_, hs, rt := newServer(t, 64, Options{})
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf(`{"stream": true, "messages": [{"role": "user", "content": "hi"}], "delay_ms": %d,
				"script": [[1], [5], [6], [2], [7], [8], [3], [4]], "stop": ["STOP"]}`, i%3)
			resp, err := http.Post(hs.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
			if err != nil {
				errs <- err.Error()
				return
			}
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			if !bytes.HasSuffix(data, []byte("data: [DONE]\n\n")) || !bytes.Contains(data, []byte(`"finish_reason":"stop"`)) {
				errs <- fmt.Sprintf("stream %d did not terminate properly: %q", i, data)
			}
			if !utf8.Valid(data) || bytes.Contains(data, []byte("\uFFFD")) {
				errs <- fmt.Sprintf("stream %d split a character", i)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	waitFor(t, "every slot freed", func() bool { st := rt.Stats(); return st.ActiveSlots == 0 && st.Finished == n })
}

func TestShutdownDrainsThenEndsStreamsWithAnErrorEvent(t *testing.T) {
	s, hs, _ := newServer(t, 4, Options{})
	resp := post(t, hs.URL+"/v1/completions", `{"prompt": "x", "stream": true, `+slowScript+`}`)
	defer resp.Body.Close()
	waitFor(t, "the stream", func() bool { return s.Active() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	done := make(chan struct{})
	go func() { s.Shutdown(ctx); close(done) }()
	waitFor(t, "draining", func() bool { return s.draining.Load() })
	refused := post(t, hs.URL+"/v1/completions", `{"prompt": "x", "script": [[1]]}`)
	refused.Body.Close()
	if refused.StatusCode != 503 {
		t.Fatalf("a request while draining got %d, want 503", refused.StatusCode)
	}
	events := readEvents(t, resp.Body)
	<-done
	last := events[len(events)-1]
	var e struct {
		Error *apiError `json:"error"`
	}
	if json.Unmarshal([]byte(last), &e) != nil || e.Error == nil || e.Error.Code == nil || *e.Error.Code != "shutdown" {
		t.Fatalf("the stream's last event is %q, want a shutdown error", last)
	}
	if s.Active() != 0 {
		t.Fatal("Shutdown returned with a request still being served")
	}
}

func TestShutdownLetsShortStreamsFinish(t *testing.T) {
	s, hs, _ := newServer(t, 4, Options{})
	resp := post(t, hs.URL+"/v1/completions", `{"prompt": "x", "stream": true, "delay_ms": 50, "script": [[1], [2]]}`)
	defer resp.Body.Close()
	waitFor(t, "the stream", func() bool { return s.Active() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	go s.Shutdown(ctx)
	events := readEvents(t, resp.Body)
	if events[len(events)-1] != "[DONE]" {
		t.Fatalf("a stream inside the grace period ended %q", events[len(events)-1])
	}
}

func TestAPIKeyAndPublicHealth(t *testing.T) {
	_, hs, _ := newServer(t, 4, Options{APIKey: "sekrit"})
	for _, tc := range []struct {
		path, auth string
		code       int
	}{
		{"/health", "", 200}, {"/v1/models", "", 401}, {"/v1/models", "Bearer wrong", 401},
		{"/v1/models", "Bearer sekrit", 200}, {"/metrics", "", 401}, {"/metrics", "Bearer sekrit", 200},
	} {
		req, _ := http.NewRequest("GET", hs.URL+tc.path, nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.code {
			t.Errorf("%s with %q: %d, want %d", tc.path, tc.auth, resp.StatusCode, tc.code)
		}
	}
	resp := post(t, hs.URL+"/v1/completions", `{"prompt": "x", "script": [[1]]}`)
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("a completion without the key got %d", resp.StatusCode)
	}
}

func TestModelsAndMetrics(t *testing.T) {
	_, hs, _ := newServer(t, 4, Options{ModelID: "tiny"})
	resp, err := http.Get(hs.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var models struct {
		Data []struct{ ID, Object string } `json:"data"`
	}
	json.NewDecoder(resp.Body).Decode(&models)
	resp.Body.Close()
	if len(models.Data) != 1 || models.Data[0].ID != "tiny" || models.Data[0].Object != "model" {
		t.Fatalf("models %+v", models)
	}
	stream(t, hs.URL+"/v1/completions", `{"prompt": "x", "stream": true, "script": [[1], [2], [3]]}`)
	post(t, hs.URL+"/v1/completions", `{"prompt": "x", "bogus": 1}`).Body.Close()
	resp, err = http.Get(hs.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics is not Prometheus text format: %v", err)
	}
	value := func(name string, labels map[string]string) float64 {
		f := families[name]
		if f == nil {
			t.Fatalf("no metric %s", name)
		}
	next:
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if labels[l.GetName()] != l.GetValue() {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
		t.Fatalf("no %s with labels %v", name, labels)
		return 0
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"lmstream_http_requests_total", map[string]string{"path": "/v1/completions", "code": "200"}, 1},
		{"lmstream_http_requests_total", map[string]string{"path": "/v1/completions", "code": "400"}, 1},
		{"lmstream_choices_finished_total", map[string]string{"reason": "end_id"}, 1},
		{"lmstream_generated_tokens_total", nil, 4},
		{"lmstream_time_to_first_token_seconds", nil, 1},
		{"lmstream_time_per_output_token_seconds", nil, 1},
		{"lmstream_queue_depth", nil, 0},
		{"lmstream_kv_cache_bytes", nil, 0}, // the replay backend holds no KV cache
		{"lmstream_kv_cache_limit_bytes", nil, 0},
		{"lmstream_draft_tokens_proposed_total", nil, 0},
		{"lmstream_draft_tokens_accepted_total", nil, 0},
	} {
		if got := value(c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}
