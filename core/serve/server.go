// Package serve is lmstream's OpenAI-compatible HTTP API over a runtime:
// /v1/chat/completions and /v1/completions (server-sent events or one JSON
// answer), /v1/models, /health and /metrics. It only translates: requests
// become the runtime's request JSON, chunks become OpenAI's chunk objects,
// and the stream contract (well-formed UTF-8 per chunk, stop strings,
// cancellation) is the runtime's, carried through unchanged.
//
// No client can take the server from the others: a stream slot is taken
// only once a request's body is in (ReadTimeout bounds the wait for it),
// every write of an answer has its own deadline (WriteTimeout: a client
// that stops reading is cut off and its request cancelled), and the
// listener HTTP makes keeps at most MaxConns connections, making room for
// a new one by closing the one that has waited on its client longest
// (kept alive with no request, or trickling its headers or body).
package serve

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lmstream/lmstream/core/loop"
	"github.com/lmstream/lmstream/core/status"
	"github.com/lmstream/lmstream/streaming"
)

// Options configure a Server. Zero values take the defaults noted.
type Options struct {
	// ModelID is the name /v1/models lists and responses carry.
	ModelID string
	// MaxBodyBytes bounds a request body (default 1 MiB): a body is read
	// whole before it is parsed.
	MaxBodyBytes int64
	// MaxStreams bounds the completion requests served at once, streaming
	// or not (default 256); beyond it a request gets 429 with Retry-After.
	MaxStreams int
	// RetryAfter is what a 429 tells the client to wait (default 1 s).
	RetryAfter time.Duration
	// APIKey, when set, is required as "Authorization: Bearer KEY" on every
	// endpoint but /health.
	APIKey string
	// DefaultDrafter is the "drafter" of requests that name none, sampling
	// ones included ("draft_model" when the server has a draft model);
	// "" leaves it to the runtime (its default drafter, greedy requests
	// only).
	DefaultDrafter string

	// ReadTimeout bounds reading a completion request's body (default
	// 30 s). The body is read before a stream slot is taken, so a client
	// that sends headers and trickles the body holds no slot, and is cut
	// off with 408 when the time is up.
	ReadTimeout time.Duration
	// WriteTimeout bounds each write of an answer (default 30 s): a client
	// that stops reading is cut off, and its request cancelled, once one
	// write has waited this long. Every write gets its own deadline, so a
	// long stream is never cut for its length.
	WriteTimeout time.Duration

	// The listener and http.Server that HTTP makes:
	//
	// ReadHeaderTimeout bounds reading a request's headers (default
	// 10 s), and ReadTimeout then its body.
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes a kept-alive connection with no request for
	// this long (default 60 s).
	IdleTimeout time.Duration
	// MaxConns bounds the connections open at once (default 1024): see
	// connLimit, which makes room for a new one by closing the one that
	// has waited on its client longest.
	MaxConns int
}

// Server serves one runtime. Create it with New, or with NewLoading
// before the runtime exists; Handler is its http.Handler, and HTTP makes
// the http.Server and listener to serve it with.
type Server struct {
	opts    Options
	ready   atomic.Pointer[engine] // nil while loading
	loaded  atomic.Uint64          // math.Float64bits of the loading progress, 0 to 1
	metrics *metrics
	mux     *http.ServeMux
	handler http.Handler
	created int64
	conns   atomic.Pointer[connLimit] // HTTP's, for the connections gauge

	slots    chan struct{} // one token per request being served
	draining atomic.Bool   // shutdown began: new requests are refused
	ending   chan struct{} // closed when the grace period is over
	endOnce  sync.Once
	inflight sync.WaitGroup
}

// engine is the runtime a Server serves, once it is loaded.
type engine struct {
	rt     *loop.Runtime
	render func([]loop.Message) (string, error)
}

// New makes a Server over rt, which the caller keeps and closes after
// Shutdown.
func New(rt *loop.Runtime, opts Options) *Server {
	s := NewLoading(opts)
	s.Ready(rt)
	return s
}

// NewLoading makes a Server whose runtime is still being created, so
// that it can listen at once: until Ready, every endpoint answers 503
// with a JSON error (code "loading") and Retry-After, and /health reports
// the loading progress (Progress).
func NewLoading(opts Options) *Server {
	if opts.ModelID == "" {
		opts.ModelID = "lmstream"
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = 1 << 20
	}
	if opts.MaxStreams <= 0 {
		opts.MaxStreams = 256
	}
	if opts.RetryAfter <= 0 {
		opts.RetryAfter = time.Second
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{
		{&opts.ReadTimeout, 30 * time.Second}, {&opts.WriteTimeout, 30 * time.Second},
		{&opts.ReadHeaderTimeout, 10 * time.Second}, {&opts.IdleTimeout, 60 * time.Second},
	} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = 1024
	}
	s := &Server{
		opts: opts, created: time.Now().Unix(),
		slots:  make(chan struct{}, opts.MaxStreams),
		ending: make(chan struct{}),
	}
	s.metrics = newMetrics(s)
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("POST /v1/chat/completions", s.auth(func(w http.ResponseWriter, r *http.Request) { s.complete(w, r, chatEndpoint) }))
	s.mux.HandleFunc("POST /v1/completions", s.auth(func(w http.ResponseWriter, r *http.Request) { s.complete(w, r, completionEndpoint) }))
	s.mux.HandleFunc("GET /v1/models", s.auth(s.models))
	s.mux.HandleFunc("GET /health", s.health)
	s.mux.Handle("GET /metrics", s.auth(s.metrics.handler.ServeHTTP))
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "invalid_request_error", "", fmt.Sprintf("no endpoint %s %s", r.Method, r.URL.Path))
	})
	s.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.ready.Load() == nil {
			s.loading(w, r)
			return
		}
		s.mux.ServeHTTP(w, r)
	})
	return s
}

// Ready makes the server serve rt (once; later calls are ignored).
func (s *Server) Ready(rt *loop.Runtime) {
	e := &engine{rt: rt}
	if in, err := rt.Introspector(); err == nil {
		e.render = func(msgs []loop.Message) (string, error) { return in.RenderChat(msgs, true, nil) }
	}
	s.Progress("", 1)
	s.ready.CompareAndSwap(nil, e)
}

// Progress records how far loading has come (fraction 0 to 1), for
// /health while loading. Its signature is loop.NewWithProgress's
// callback's; safe from any goroutine.
func (s *Server) Progress(_ string, fraction float64) {
	s.loaded.Store(math.Float64bits(min(max(fraction, 0), 1)))
}

// loading answers every request while the runtime is being created.
func (s *Server) loading(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Retry-After", strconv.Itoa(int((s.opts.RetryAfter+time.Second-1)/time.Second)))
	body := map[string]any{}
	for k, v := range errorBody("server_error", "", "the model is loading; retry later", "loading") {
		body[k] = v
	}
	if r.URL.Path == "/health" {
		body["status"] = "loading"
		body["progress"] = math.Float64frombits(s.loaded.Load())
	}
	writeJSON(w, http.StatusServiceUnavailable, body)
}

// Handler is the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.handler }

// HTTP returns the http.Server that serves s and ln wrapped to keep at
// most MaxConns connections open (connLimit); serve them with
// hs.Serve(l). Headers must arrive within ReadHeaderTimeout, a request
// whole within ReadTimeout more, and a kept-alive connection is closed
// after IdleTimeout without a request. No write timeout is set on the
// server: a stream may rightly run for hours, so each write gets its own
// deadline (Options.WriteTimeout).
func (s *Server) HTTP(ln net.Listener) (*http.Server, net.Listener) {
	l := newConnLimit(ln, s.opts.MaxConns)
	s.conns.Store(l)
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: s.opts.ReadHeaderTimeout,
		ReadTimeout:       s.opts.ReadHeaderTimeout + s.opts.ReadTimeout,
		IdleTimeout:       s.opts.IdleTimeout,
		ConnState:         l.connState,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
	}
	return hs, l
}

// current is the runtime being served; nil while loading.
func (s *Server) current() *loop.Runtime {
	if e := s.ready.Load(); e != nil {
		return e.rt
	}
	return nil
}

// Active is the number of completion requests being served.
func (s *Server) Active() int { return len(s.slots) }

// Shutdown refuses new completion requests (503), lets those running finish
// until ctx is done, then ends the rest: each stream gets an error event
// and its request is cancelled. It returns once every request has returned.
// Stopping the listener is the http.Server's Shutdown, run alongside.
func (s *Server) Shutdown(ctx context.Context) {
	s.draining.Store(true)
	done := make(chan struct{})
	go func() { s.inflight.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.endOnce.Do(func() { close(s.ending) })
		<-done
	}
}

func (s *Server) auth(h http.HandlerFunc) http.HandlerFunc {
	if s.opts.APIKey == "" {
		return h
	}
	want := []byte("Bearer " + s.opts.APIKey)
	return func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			s.metrics.request(r.URL.Path, http.StatusUnauthorized)
			w.Header().Set("WWW-Authenticate", "Bearer")
			writeError(w, http.StatusUnauthorized, "invalid_request_error", "", "missing or wrong API key (send Authorization: Bearer KEY)")
			return
		}
		h(w, r)
	}
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "shutting down"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "list",
		"data": []map[string]any{{
			"id": s.opts.ModelID, "object": "model", "created": s.created, "owned_by": "lmstream",
		}},
	})
}

// statusClientClosed is what /metrics counts for a request whose client
// left before it was answered (nginx's 499): there is nobody to send a
// status to.
const statusClientClosed = 499

// complete serves both completion endpoints. The body is read, and the
// request parsed, before a stream slot is taken: a slot is held only by
// a request that can be served.
func (s *Server) complete(w http.ResponseWriter, r *http.Request, kind endpoint) {
	path := r.URL.Path
	if s.draining.Load() {
		s.metrics.request(path, http.StatusServiceUnavailable)
		writeError(w, http.StatusServiceUnavailable, "server_error", "", "the server is shutting down")
		return
	}
	s.inflight.Add(1)
	defer s.inflight.Done()
	e := s.ready.Load()

	body, err := s.readBody(w, r)
	if err != nil {
		code, msg := http.StatusBadRequest, fmt.Sprintf("reading the request body: %v", err)
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			code, msg = http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body is larger than %d bytes", s.opts.MaxBodyBytes)
		case errors.Is(err, os.ErrDeadlineExceeded):
			code, msg = http.StatusRequestTimeout, fmt.Sprintf("the request body did not arrive within %v", s.opts.ReadTimeout)
		}
		s.metrics.request(path, code)
		writeError(w, code, "invalid_request_error", "", msg)
		return
	}
	c, err := parseCall(kind, body, e.render, s.opts.DefaultDrafter)
	if err != nil {
		s.fail(w, path, err)
		return
	}
	select {
	case s.slots <- struct{}{}:
	default:
		s.metrics.request(path, http.StatusTooManyRequests)
		w.Header().Set("Retry-After", strconv.Itoa(int((s.opts.RetryAfter+time.Second-1)/time.Second)))
		writeError(w, http.StatusTooManyRequests, "rate_limit_error", "", fmt.Sprintf("%d requests are being served, the most this server takes at once; retry later", s.opts.MaxStreams))
		return
	}
	defer func() { <-s.slots }()
	chans := make([]*streaming.Channel, c.n)
	for i := range chans {
		chans[i] = streaming.NewChannel()
	}
	defer func() {
		for _, ch := range chans {
			ch.Release()
		}
	}()
	// The request's context ends when its client leaves: a grammar still
	// compiling then stops, and nobody is there to read an answer.
	if err := e.rt.SubmitContext(r.Context(), c.runtimeJSON, chans); err != nil {
		if r.Context().Err() != nil {
			s.metrics.request(path, statusClientClosed)
			return
		}
		s.fail(w, path, err)
		return
	}
	s.metrics.request(path, http.StatusOK)
	a := &answer{s: s, c: c, w: w, rc: http.NewResponseController(w), id: newID(kind), created: time.Now().Unix()}
	a.run(r.Context(), chans)
}

// readBody reads a request's body whole, within ReadTimeout, while its
// connection counts as waiting on the client (connLimit may close it to
// make room). Once the body is in, the read deadline is cleared: net/http
// goes on reading in the background to notice a client that leaves, and
// a deadline expiring there would end a long answer as if it had. A body
// that failed is not cleared: the connection cannot carry another
// request, and is closed after the error (net/http would otherwise wait,
// with no deadline, for the rest of the body before answering).
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(s.opts.ReadTimeout)) // unsupported (tests' recorders): no deadline
	waitingBody(r.Context(), true)
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
	waitingBody(r.Context(), false)
	if err != nil {
		w.Header().Set("Connection", "close")
		return nil, err
	}
	_ = rc.SetReadDeadline(time.Time{})
	return body, nil
}

// fail writes a request's error in OpenAI's shape.
func (s *Server) fail(w http.ResponseWriter, path string, err error) {
	code, typ := httpStatus(err)
	param := ""
	var re *requestError
	if errors.As(err, &re) {
		param = re.param
	} else if m := fieldName.FindStringSubmatch(err.Error()); m != nil {
		param = m[1]
	}
	if code == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", strconv.Itoa(int((s.opts.RetryAfter+time.Second-1)/time.Second)))
	}
	s.metrics.request(path, code)
	writeError(w, code, typ, param, err.Error())
}

// fieldName finds the field a runtime error names ("request field "top_k"
// must be ...", "unknown field "logprobs"") for the error's "param".
var fieldName = regexp.MustCompile(`(?:field|fields) "([^"]+)"`)

func newID(kind endpoint) string {
	var b [12]byte
	rand.Read(b[:])
	if kind == chatEndpoint {
		return "chatcmpl-" + hex.EncodeToString(b[:])
	}
	return "cmpl-" + hex.EncodeToString(b[:])
}

// apiError is OpenAI's error object.
type apiError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func errorBody(typ, param, msg string, code string) map[string]apiError {
	e := apiError{Message: msg, Type: typ}
	if param != "" {
		e.Param = &param
	}
	if code != "" {
		e.Code = &code
	}
	return map[string]apiError{"error": e}
}

func writeError(w http.ResponseWriter, code int, typ, param, msg string) {
	writeJSON(w, code, errorBody(typ, param, msg, ""))
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}

// errorCode names a runtime status code for an error event's "code".
func errorCode(c int32) string {
	if id := status.Code(c).Ident(); id != "" {
		return id
	}
	return strconv.Itoa(int(c))
}
