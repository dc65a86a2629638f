// Command lmstream-serve serves one model over OpenAI's HTTP API (package
// core/serve): POST /v1/chat/completions and /v1/completions, streaming as
// server-sent events, GET /v1/models, /health and /metrics.
//
//	lmstream-serve --model smollm2-135m [--port 8080] [--host 127.0.0.1]
//	               [--draft-model PATH] [--threads N] [--ctx N] [--slots N] [--kv-type q8_0]
//	               [--config serve.json] [--runtime-config runtime.json]
//
// --config names a JSON file with the same settings as the flags (keys
// "model", "draft_model", "threads", "ctx", "slots", "kv_type", "host", "port",
// "max_streams", "max_body_bytes", "max_conns", "api_key", "grace",
// "read_header_timeout", "read_timeout", "write_timeout", "idle_timeout",
// "model_id"); flags given on the command line win over it.
// --runtime-config names a runtime config (the C ABI's lms_runtime_create
// JSON: any backend, any backend field), which the model flags then
// complete. With a draft model, it drafts for every request that names no
// "drafter", sampling ones too.
//
// The server listens at once and prints its address; until the model is
// loaded every endpoint answers 503 (code "loading", /health with the
// progress), and a second line says when it is ready.
//
// The API key is read from LMSTREAM_API_KEY (or the config file's
// "api_key"), never from a flag, so it does not show in the process list.
//
// SIGTERM or SIGINT: the server stops accepting, lets running answers
// finish for --grace, then ends the rest with an error event.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	_ "github.com/lmstream/lmstream/core/cpu"
	_ "github.com/lmstream/lmstream/core/cuda"
	"github.com/lmstream/lmstream/core/loop"
	_ "github.com/lmstream/lmstream/core/replay"
	"github.com/lmstream/lmstream/core/serve"
)

// settings are the flags and the config file's keys.
type settings struct {
	Model        string   `json:"model"`
	DraftModel   string   `json:"draft_model"`
	Threads      int      `json:"threads"`
	Ctx          int      `json:"ctx"`
	Slots        int      `json:"slots"`
	KVType       string   `json:"kv_type"`
	Host         string   `json:"host"`
	Port         int      `json:"port"`
	MaxStreams   int      `json:"max_streams"`
	MaxBodyBytes int64    `json:"max_body_bytes"`
	APIKey       string   `json:"api_key"`
	Grace        duration `json:"grace"`
	ModelID      string   `json:"model_id"`
	MaxConns     int      `json:"max_conns"`
	// Timeouts (serve.Options says what each bounds).
	ReadHeaderTimeout duration `json:"read_header_timeout"`
	ReadTimeout       duration `json:"read_timeout"`
	WriteTimeout      duration `json:"write_timeout"`
	IdleTimeout       duration `json:"idle_timeout"`
}

// duration reads "10s" in the config file as flag.Duration does.
type duration time.Duration

func (d *duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration must be a string such as \"10s\"")
	}
	v, err := time.ParseDuration(s)
	*d = duration(v)
	return err
}

func main() {
	// Signals are caught from the start: whoever saw the address line may
	// send SIGTERM at once and must get the graceful shutdown.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "lmstream-serve:", err)
		os.Exit(1)
	}
}

// newRuntime creates the runtime (a variable so that a test can hold the
// load back and see the server answer while it lasts).
var newRuntime = loop.NewWithProgress

// run serves until ctx is cancelled (a signal) or loading fails. The
// address line and the ready line go to out.
func run(ctx context.Context, args []string, out io.Writer) error {
	set, runtimeConfig, err := parseSettings(args)
	if err != nil || set == nil {
		return err
	}
	cfg, drafter, err := runtimeJSON(runtimeConfig, set)
	if err != nil {
		return err
	}
	if set.ModelID == "" {
		set.ModelID = "lmstream"
		if set.Model != "" {
			set.ModelID = trimExt(filepath.Base(set.Model))
		}
	}
	if limit := fileLimit(); limit > 0 && set.MaxConns > limit {
		log.Printf("lmstream-serve: --max-conns %d is more than the file limit leaves (%d); serving at most %d connections", set.MaxConns, limit, limit)
		set.MaxConns = limit
	}
	return serveModel(ctx, set, cfg, drafter, out)
}

// parseSettings reads the flags, the --config file and the environment.
// A nil settings and nil error: the usage was printed, as asked.
func parseSettings(args []string) (*settings, string, error) {
	fs := flag.NewFlagSet("lmstream-serve", flag.ContinueOnError)
	var set settings
	durations := map[string]*time.Duration{}
	durationFlag := func(name string, def time.Duration, usage string) {
		d := def
		durations[name] = &d
		fs.DurationVar(&d, name, def, usage)
	}
	configPath := fs.String("config", "", "JSON file with these settings (flags win)")
	runtimeConfig := fs.String("runtime-config", "", "runtime config JSON file (any backend and field); the flags complete it")
	fs.StringVar(&set.Model, "model", "", "GGUF file, or a model's name (smollm2-135m)")
	fs.StringVar(&set.DraftModel, "draft-model", "", "draft model for speculative decoding (same vocabulary); it drafts for every request naming no drafter")
	fs.IntVar(&set.Threads, "threads", 0, "engine threads (0: all cores)")
	fs.IntVar(&set.Ctx, "ctx", 0, "context per sequence in tokens (0: the model's trained context, as far as the memory budget holds one sequence of it)")
	fs.StringVar(&set.KVType, "kv-type", "", "how the KV caches store entries: f16 (default) or q8_0 (17/32 of the memory, as llama.cpp's -ctk/-ctv q8_0)")
	fs.IntVar(&set.Slots, "slots", 0, "sequences decoded at once (0: the runtime's default, 8)")
	fs.StringVar(&set.Host, "host", "127.0.0.1", "address to listen on")
	fs.IntVar(&set.Port, "port", 8080, "port to listen on (0: any free port, printed at start)")
	fs.IntVar(&set.MaxStreams, "max-streams", 256, "completion requests served at once; more get 429")
	fs.Int64Var(&set.MaxBodyBytes, "max-body-bytes", 1<<20, "largest request body")
	fs.IntVar(&set.MaxConns, "max-conns", 1024, "connections open at once (at most the file limit allows); a new one closes the one waiting longest on its client")
	durationFlag("grace", 10*time.Second, "on SIGTERM, how long running answers may finish")
	durationFlag("read-header-timeout", 10*time.Second, "time for a request's headers to arrive")
	durationFlag("read-timeout", 30*time.Second, "time for a request's body to arrive, after its headers (then 408)")
	durationFlag("write-timeout", 30*time.Second, "time each write of an answer may wait for the client to read (then the request is cancelled)")
	durationFlag("idle-timeout", 60*time.Second, "a kept-alive connection with no request is closed after this")
	fs.StringVar(&set.ModelID, "model-id", "", "model name /v1/models lists (default: the model file's base name)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, "", nil
		}
		return nil, "", err
	}
	if fs.NArg() > 0 {
		return nil, "", fmt.Errorf("unexpected argument %q (settings are flags: --model ...)", fs.Arg(0))
	}
	set.Grace = duration(*durations["grace"])
	set.ReadHeaderTimeout = duration(*durations["read-header-timeout"])
	set.ReadTimeout = duration(*durations["read-timeout"])
	set.WriteTimeout = duration(*durations["write-timeout"])
	set.IdleTimeout = duration(*durations["idle-timeout"])
	if *configPath != "" {
		if err := applyConfigFile(*configPath, fs, &set); err != nil {
			return nil, "", err
		}
	}
	if k := os.Getenv("LMSTREAM_API_KEY"); k != "" {
		set.APIKey = k
	}
	return &set, *runtimeConfig, nil
}

// serveModel listens, loads the runtime and serves it until ctx ends.
func serveModel(ctx context.Context, set *settings, cfg []byte, drafter string, out io.Writer) error {
	// Listen first, so that clients and health checks get an answer
	// (503, loading) while the model loads, as they would from any
	// server that is up.
	ln, err := net.Listen("tcp", net.JoinHostPort(set.Host, strconv.Itoa(set.Port)))
	if err != nil {
		return err
	}
	srv := serve.NewLoading(serve.Options{
		ModelID: set.ModelID, MaxBodyBytes: set.MaxBodyBytes, MaxStreams: set.MaxStreams, APIKey: set.APIKey,
		DefaultDrafter: drafter, MaxConns: set.MaxConns,
		ReadHeaderTimeout: time.Duration(set.ReadHeaderTimeout), ReadTimeout: time.Duration(set.ReadTimeout),
		WriteTimeout: time.Duration(set.WriteTimeout), IdleTimeout: time.Duration(set.IdleTimeout),
	})
	hs, limited := srv.HTTP(ln)
	served := make(chan error, 1)
	go func() { served <- hs.Serve(limited) }()
	// The address line is what scripts and tests wait for (with --port 0
	// it is the only way to learn the port); the ready line follows.
	fmt.Fprintf(out, "lmstream-serve: listening on http://%s; loading model %s\n", ln.Addr(), set.ModelID)

	start := time.Now()
	type loaded struct {
		rt  *loop.Runtime
		err error
	}
	loading := make(chan loaded, 1)
	go func() {
		rt, err := newRuntime(cfg, srv.Progress)
		loading <- loaded{rt, err}
	}()
	var rt *loop.Runtime
	select {
	case l := <-loading:
		if l.err != nil {
			hs.Close()
			return fmt.Errorf("creating the runtime: %w", l.err)
		}
		rt = l.rt
	case <-ctx.Done():
		// Nothing is being served yet: stop at once. The load cannot be
		// interrupted; the process ends under it.
		hs.Close()
		return nil
	case err := <-served:
		return err
	}
	defer rt.Close()
	srv.Ready(rt)
	fmt.Fprintf(out, "lmstream-serve: model %s loaded in %.1fs; ready\n", set.ModelID, time.Since(start).Seconds())

	select {
	case err := <-served:
		return err
	case <-ctx.Done():
		log.Printf("lmstream-serve: no longer accepting; answers in progress have %v to finish", time.Duration(set.Grace))
	}
	// hs.Shutdown closes the listener at once and waits for the handlers;
	// srv.Shutdown ends the answers still running when the grace is over,
	// so hs.Shutdown's own deadline only backs that up.
	gctx, cancel := context.WithTimeout(context.Background(), time.Duration(set.Grace))
	defer cancel()
	go srv.Shutdown(gctx)
	hctx, hcancel := context.WithTimeout(context.Background(), time.Duration(set.Grace)+5*time.Second)
	defer hcancel()
	if err := hs.Shutdown(hctx); err != nil {
		hs.Close()
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// fileLimit is how many connections the process's file limit leaves room
// for (the soft limit, which Go raises to the hard one at start, less a
// margin for the model files and the rest); 0 when unknown.
func fileLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > 1<<30 {
		return 0
	}
	return max(int(rl.Cur)-64, 16)
}

// applyConfigFile fills the settings no flag set explicitly.
func applyConfigFile(path string, fs *flag.FlagSet, set *settings) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var file settings
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	// Defaults from the flags, so a key the file leaves out keeps them.
	file = *set
	if err := dec.Decode(&file); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if !given["model"] {
		set.Model = file.Model
	}
	if !given["draft-model"] {
		set.DraftModel = file.DraftModel
	}
	if !given["threads"] {
		set.Threads = file.Threads
	}
	if !given["ctx"] {
		set.Ctx = file.Ctx
	}
	if !given["slots"] {
		set.Slots = file.Slots
	}
	if !given["kv-type"] {
		set.KVType = file.KVType
	}
	if !given["host"] {
		set.Host = file.Host
	}
	if !given["port"] {
		set.Port = file.Port
	}
	if !given["max-streams"] {
		set.MaxStreams = file.MaxStreams
	}
	if !given["max-body-bytes"] {
		set.MaxBodyBytes = file.MaxBodyBytes
	}
	if !given["grace"] {
		set.Grace = file.Grace
	}
	if !given["model-id"] {
		set.ModelID = file.ModelID
	}
	if !given["max-conns"] {
		set.MaxConns = file.MaxConns
	}
	for _, d := range []struct {
		flag     string
		dst, src *duration
	}{
		{"read-header-timeout", &set.ReadHeaderTimeout, &file.ReadHeaderTimeout},
		{"read-timeout", &set.ReadTimeout, &file.ReadTimeout},
		{"write-timeout", &set.WriteTimeout, &file.WriteTimeout},
		{"idle-timeout", &set.IdleTimeout, &file.IdleTimeout},
	} {
		if !given[d.flag] {
			*d.dst = *d.src
		}
	}
	set.APIKey = file.APIKey
	return nil
}

// runtimeJSON builds the runtime config: the --runtime-config file, if
// any, with the model settings added (the cpu backend's field names). It
// also returns the server's default drafter: "draft_model" when there is
// a draft model and the runtime config names no other default.
func runtimeJSON(path string, set *settings) ([]byte, string, error) {
	cfg := map[string]any{}
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, "", err
		}
		if err := json.Unmarshal(data, &cfg); err != nil {
			return nil, "", fmt.Errorf("%s: %v", path, err)
		}
	}
	if set.Model == "" && path == "" {
		return nil, "", fmt.Errorf("--model is required (a GGUF file or a model's name such as smollm2-135m)")
	}
	add := func(key string, v any, given bool) {
		if given {
			cfg[key] = v
		}
	}
	add("model_path", set.Model, set.Model != "")
	add("draft_model_path", set.DraftModel, set.DraftModel != "")
	add("drafter", "draft_model", set.DraftModel != "")
	add("threads", set.Threads, set.Threads > 0)
	add("context_length", set.Ctx, set.Ctx > 0)
	add("max_slots", set.Slots, set.Slots > 0)
	add("kv_type", set.KVType, set.KVType != "")
	// A server is up for long: on a model's first start it serves at
	// once and measures its cost curve while no request is runnable.
	if _, given := cfg["calibration"]; !given && (cfg["backend"] == nil || cfg["backend"] == "cpu") {
		cfg["calibration"] = "idle"
	}
	drafter := ""
	if _, ok := cfg["draft_model_path"]; ok {
		if d, named := cfg["drafter"]; !named || d == "draft_model" {
			cfg["drafter"], drafter = "draft_model", "draft_model"
		}
	}
	data, err := json.Marshal(cfg)
	return data, drafter, err
}

func trimExt(name string) string {
	if ext := filepath.Ext(name); ext == ".gguf" {
		return name[:len(name)-len(ext)]
	}
	return name
}
