// Package serve is lmstream's OpenAI-compatible HTTP API over a runtime:
// /v1/chat/completions and /v1/completions (server-sent events or one JSON
// answer), /v1/models, /health and /metrics. It only translates: requests
// become the runtime's request JSON, chunks become OpenAI's chunk objects,
// and the stream contract (well-formed UTF-8 per chunk, stop strings,
// cancellation) is the runtime's, carried through unchanged.
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
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lmstream/lmstream/core/runtime"
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
}

// Server serves one runtime. Create it with New; Handler is its http.Handler.
type Server struct {
	rt      *runtime.Runtime
	opts    Options
	render  func([]runtime.Message) (string, error)
	metrics *metrics
	mux     *http.ServeMux
	created int64

	slots    chan struct{} // one token per request being served
	draining atomic.Bool   // shutdown began: new requests are refused
	ending   chan struct{} // closed when the grace period is over
	endOnce  sync.Once
	inflight sync.WaitGroup
}

// New makes a Server over rt, which the caller keeps and closes after
// Shutdown.
func New(rt *runtime.Runtime, opts Options) *Server {
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
	s := &Server{
		rt: rt, opts: opts, created: time.Now().Unix(),
		slots:  make(chan struct{}, opts.MaxStreams),
		ending: make(chan struct{}),
	}
	if in, err := rt.Introspector(); err == nil {
		s.render = func(msgs []runtime.Message) (string, error) { return in.RenderChat(msgs, true) }
	}
	s.metrics = newMetrics(rt, s)
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("POST /v1/chat/completions", s.auth(func(w http.ResponseWriter, r *http.Request) { s.complete(w, r, chatEndpoint) }))
	s.mux.HandleFunc("POST /v1/completions", s.auth(func(w http.ResponseWriter, r *http.Request) { s.complete(w, r, completionEndpoint) }))
	s.mux.HandleFunc("GET /v1/models", s.auth(s.models))
	s.mux.HandleFunc("GET /health", s.health)
	s.mux.Handle("GET /metrics", s.auth(s.metrics.handler.ServeHTTP))
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "invalid_request_error", "", fmt.Sprintf("no endpoint %s %s", r.Method, r.URL.Path))
	})
	return s
}

// Handler is the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.mux }

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

// complete serves both completion endpoints.
func (s *Server) complete(w http.ResponseWriter, r *http.Request, kind endpoint) {
	path := r.URL.Path
	if s.draining.Load() {
		s.metrics.request(path, http.StatusServiceUnavailable)
		writeError(w, http.StatusServiceUnavailable, "server_error", "", "the server is shutting down")
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
	s.inflight.Add(1)
	defer func() { <-s.slots; s.inflight.Done() }()

	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBodyBytes))
	if err != nil {
		code, msg := http.StatusBadRequest, fmt.Sprintf("reading the request body: %v", err)
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			code, msg = http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body is larger than %d bytes", s.opts.MaxBodyBytes)
		}
		s.metrics.request(path, code)
		writeError(w, code, "invalid_request_error", "", msg)
		return
	}
	c, err := parseCall(kind, body, s.render)
	if err != nil {
		s.fail(w, path, err)
		return
	}
	chans := make([]*streaming.Channel, c.n)
	for i := range chans {
		chans[i] = streaming.NewChannel()
	}
	defer func() {
		for _, ch := range chans {
			ch.Release()
		}
	}()
	if err := s.rt.Submit(c.runtimeJSON, chans); err != nil {
		s.fail(w, path, err)
		return
	}
	s.metrics.request(path, http.StatusOK)
	a := &answer{s: s, c: c, w: w, id: newID(kind), created: time.Now().Unix()}
	a.run(r.Context(), chans)
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
