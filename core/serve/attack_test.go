package serve

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lmstream/lmstream/core/loop"
)

// The clients below misbehave on purpose, each a bounded number of times
// and only ever towards 127.0.0.1. None of them may take the server from
// its other clients.

// serveTCP serves s the way lmstream-serve does (HTTP: the connection
// limit and the timeouts) on a loopback port.
func serveTCP(t *testing.T, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs, l := s.HTTP(ln)
	go hs.Serve(l)
	t.Cleanup(func() { hs.Close() })
	return ln.Addr().String()
}

func replayServer(t *testing.T, cfg string, opts Options) (*Server, *loop.Runtime) {
	t.Helper()
	rt, err := loop.New([]byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	return New(rt, opts), rt
}

// dial opens a raw connection that the test closes.
func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// readResponse reads one response from a raw connection, giving up after
// 10 s (a bound for the test, not a timing it asserts).
func readResponse(t *testing.T, c net.Conn, br *bufio.Reader) (*http.Response, string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("reading a response: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(body)
}

// 256 POSTs that sent their headers and never their body used to take
// every stream slot (taken before the body was read): now the slots go to
// requests whose body is in, and the silent ones get 408 when ReadTimeout
// is up.
func TestSlowBodiesHoldNoSlot(t *testing.T) {
	s, _ := replayServer(t, fmt.Sprintf(replayConfig, 4), Options{MaxStreams: 2, ReadTimeout: 300 * time.Millisecond})
	addr := serveTCP(t, s)
	var slow []net.Conn
	for range 8 {
		c := dial(t, addr)
		fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"pro")
		slow = append(slow, c)
	}
	for range 3 {
		resp := post(t, "http://"+addr+"/v1/completions", `{"prompt": "x", "script": [[1], [2]]}`)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), "Hello") {
			t.Fatalf("a whole request beside 8 silent bodies: %d %s", resp.StatusCode, body)
		}
	}
	for _, c := range slow {
		resp, body := readResponse(t, c, bufio.NewReader(c))
		if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(body, "did not arrive") {
			t.Fatalf("a silent body: %d %s", resp.StatusCode, body)
		}
	}
	if s.Active() != 0 {
		t.Fatalf("%d requests still served", s.Active())
	}
}

// bigConfig is a replay vocabulary whose token 1 is 4 KiB of text.
var bigConfig = fmt.Sprintf(`{"backend": "replay", "max_slots": 2, "eos_id": 0, "special_ids": [0], "vocab": ["3c2f733e", %q]}`,
	hex.EncodeToString([]byte(strings.Repeat("a", 4096))))

// A streaming client that stops reading: once a write has waited
// WriteTimeout the answer ends, its request is cancelled and the slot is
// free again (it used to stay taken after generation had ended, for as
// long as the client kept the connection).
func TestStalledReaderIsCutOff(t *testing.T) {
	s, rt := replayServer(t, bigConfig, Options{WriteTimeout: 300 * time.Millisecond})
	addr := serveTCP(t, s)
	// A small receive window, so that the 12 MiB answer fills the
	// socket's buffers quickly.
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 4096) })
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body := `{"prompt": "x", "stream": true, "script": [` + strings.TrimSuffix(strings.Repeat("[1], ", 3000), ", ") + `]}`
	fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || !strings.Contains(line, "200") {
		t.Fatalf("status line %q, %v", line, err)
	}
	// The client reads no more.
	waitFor(t, "the stalled answer to be cut off", func() bool { return s.Active() == 0 && rt.Stats().ActiveSlots == 0 })
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), `lmstream_choices_finished_total{reason="write_timeout"} 1`) {
		t.Fatalf("no answer counted as ended by the write timeout:\n%s", metrics)
	}
	// The server serves on.
	if _, texts, _ := stream(t, "http://"+addr+"/v1/completions", `{"prompt": "x", "stream": true, "script": [[1]]}`); len(texts[0]) != 4096 {
		t.Fatalf("the next stream got %d bytes", len(texts[0]))
	}
}

// ~20,000 idle keep-alive connections to /health used to exhaust the file
// limit. Now at most MaxConns are open, and a new connection makes room
// by closing the one that has waited on its client longest, so kept-alive
// and silent connections never lock out the next health probe.
func TestConnectionFloodLeavesRoom(t *testing.T) {
	s, _ := replayServer(t, fmt.Sprintf(replayConfig, 4), Options{MaxConns: 16, IdleTimeout: time.Minute})
	addr := serveTCP(t, s)
	limit := s.conns.Load()
	for i := range 64 {
		c := dial(t, addr)
		fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp, body := readResponse(t, c, bufio.NewReader(c)); resp.StatusCode != 200 {
			t.Fatalf("keep-alive client %d: %d %s", i, resp.StatusCode, body)
		}
		if n := limit.Open(); n > 16 {
			t.Fatalf("%d connections open, at most 16 allowed", n)
		}
	}
	for range 64 {
		c := dial(t, addr)
		fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHo") // and never the rest
	}
	probe := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
	resp, err := probe.Get("http://" + addr + "/health")
	if err != nil {
		t.Fatalf("a health probe after 128 hogging connections: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || limit.Open() > 16 {
		t.Fatalf("health %d with %d connections open", resp.StatusCode, limit.Open())
	}
}

// A kept-alive connection with no request is closed after IdleTimeout.
func TestIdleConnectionIsClosed(t *testing.T) {
	s, _ := replayServer(t, fmt.Sprintf(replayConfig, 4), Options{IdleTimeout: 100 * time.Millisecond})
	c := dial(t, serveTCP(t, s))
	br := bufio.NewReader(c)
	fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, _ := readResponse(t, c, br); resp.StatusCode != 200 {
		t.Fatalf("health %d", resp.StatusCode)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("an idle connection read %v, want EOF (closed by the server)", err)
	}
}

// Schemas that used to cost seconds and hundreds of MB inside submit, or
// be accepted and then fail mid-stream, are refused at submit with a 400
// that names the schema's part; the server answers on meanwhile.
func TestHostileSchemasAreRefusedAtSubmit(t *testing.T) {
	_, hs, _ := newServer(t, 4, Options{MaxBodyBytes: 4 << 20})
	schema := func(s string) string {
		return `{"prompt": "x", "script": [[1]], "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": ` + s + `}}}`
	}
	var props strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&props, `%s"p%d": {"type": "integer"}`, map[bool]string{true: ", "}[i > 0], i)
	}
	for _, tc := range []struct{ body, says string }{
		{schema(`{"type": "string", "pattern": "` + strings.Repeat("(", 50_000) + "a" + strings.Repeat(")", 50_000) + `"}`), "groups nest deeper than"},
		{schema(`{"type": "string", "pattern": "` + strings.Repeat("(", 400_000) + "a" + strings.Repeat(")", 400_000) + `"}`), "groups nest deeper than"},
		{schema(`{"type": "object", "properties": {` + props.String() + `}}`), "ways at once"},
		{schema(`{"type": "object", "properties": {"x": {"type": "string", "pattern": "(a?){1000}"}}}`), "#/properties/x"},
	} {
		resp := post(t, hs.URL+"/v1/completions", tc.body)
		var e struct{ Error *apiError }
		json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != 400 || e.Error == nil || !strings.Contains(e.Error.Message, tc.says) {
			t.Errorf("%.70s...: %d %+v, want 400 saying %q", tc.body, resp.StatusCode, e.Error, tc.says)
		}
	}
	_, texts, _ := stream(t, hs.URL+"/v1/completions", `{"prompt": "x", "stream": true, "script": [[1], [2]]}`)
	if texts[0] != "Hello" {
		t.Fatalf("after the refusals: %q", texts[0])
	}
}

// A 300-byte request could ask for hundreds of MB of logprobs: choices ×
// tokens × (1 + top_logprobs) is bounded, and beyond it the request is a
// 400 naming the fields.
func TestLogprobsBeyondTheResponseBudget(t *testing.T) {
	_, hs, _ := newServer(t, 4, Options{})
	resp := post(t, hs.URL+"/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "script": [[1]],
		"logprobs": true, "top_logprobs": 20, "max_tokens": 20000}`)
	var e struct{ Error *apiError }
	json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	if resp.StatusCode != 400 || e.Error == nil || e.Error.Param == nil || *e.Error.Param != "max_tokens" ||
		!strings.Contains(e.Error.Message, "too many log-probabilities") {
		t.Fatalf("%d %+v", resp.StatusCode, e.Error)
	}
}

// A server made before its runtime listens at once: until Ready every
// endpoint answers 503 with a JSON error (code "loading") and
// Retry-After, /health with the progress; then it serves.
func TestLoadingServerAnswers503UntilReady(t *testing.T) {
	s := NewLoading(Options{RetryAfter: 2 * time.Second})
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	s.Progress("weights", 0.25)
	check := func(method, path string) map[string]any {
		t.Helper()
		req, _ := http.NewRequest(method, hs.URL+path, strings.NewReader(`{"prompt": "x"}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		e, _ := body["error"].(map[string]any)
		if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "2" || e == nil || e["code"] != "loading" {
			t.Fatalf("%s %s while loading: %d (Retry-After %q) %v", method, path, resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
		return body
	}
	if h := check("GET", "/health"); h["status"] != "loading" || h["progress"] != 0.25 {
		t.Fatalf("health while loading: %v", h)
	}
	check("POST", "/v1/completions")
	check("POST", "/v1/chat/completions")
	check("GET", "/v1/models")
	check("GET", "/metrics")

	rt, err := loop.New(fmt.Appendf(nil, replayConfig, 2))
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	s.Ready(rt)
	resp, err := http.Get(hs.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("health once ready: %d", resp.StatusCode)
	}
	if _, texts, _ := stream(t, hs.URL+"/v1/completions", `{"prompt": "x", "stream": true, "script": [[1]]}`); texts[0] != "Hel" {
		t.Fatalf("once ready: %q", texts[0])
	}
}

// With a default drafter (the server's draft model), every request that
// names no drafter gets it, sampling ones too; one that names a drafter
// keeps its own.
func TestDefaultDrafterFillsRequestsThatNameNone(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{`{"prompt": "x", "temperature": 0.8}`, "draft_model"},
		{`{"prompt": "x", "drafter": "ngram"}`, "ngram"},
		{`{"prompt": "x", "speculate": false}`, "draft_model"}, // the runtime turns it off
	} {
		c, err := parseCall(completionEndpoint, []byte(tc.body), nil, "draft_model")
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		json.Unmarshal(c.runtimeJSON, &m)
		if m["drafter"] != tc.want {
			t.Errorf("%s became %s", tc.body, c.runtimeJSON)
		}
	}
	c, _ := parseCall(completionEndpoint, []byte(`{"prompt": "x"}`), nil, "")
	if strings.Contains(string(c.runtimeJSON), "drafter") {
		t.Errorf("without a default drafter the request became %s", c.runtimeJSON)
	}
}

// A client that leaves while its request's schema compiles stops the
// compile (the request's context reaches it): nothing is written to it,
// /metrics counts the request as 499, and the slot it took is free again.
// The context is cancelled before the request is served, so the compile
// stops at its first look at it, whatever the machine's speed.
func TestClientGoneWhileItsSchemaCompiles(t *testing.T) {
	s, hs, _ := newServer(t, 1, Options{MaxBodyBytes: 4 << 20})
	var props, required strings.Builder
	for i := range 800 {
		sep := map[bool]string{true: ", "}[i > 0]
		fmt.Fprintf(&props, `%s"p%d": {"type": "string", "pattern": "[a-z]+(-[0-9]{2})?"}`, sep, i)
		fmt.Fprintf(&required, `%s"p%d"`, sep, i)
	}
	body := `{"prompt": "x", "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": ` +
		`{"type": "object", "properties": {` + props.String() + `}, "required": [` + required.String() + `]}}}}`
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/v1/completions", strings.NewReader(body)).WithContext(gone))
	if rec.Body.Len() != 0 {
		t.Fatalf("answered a client that left: %d %s", rec.Code, rec.Body.String())
	}
	resp, err := http.Get(hs.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(m), `lmstream_http_requests_total{code="499",path="/v1/completions"} 1`) {
		t.Errorf("metrics do not count the request as 499:\n%s", m)
	}
	// The one slot is free: a request is served.
	_, texts, _ := stream(t, hs.URL+"/v1/completions", `{"prompt": "x", "stream": true, "script": [[1], [2]]}`)
	if texts[0] != "Hello" {
		t.Fatalf("after the client left: %q", texts[0])
	}
}
