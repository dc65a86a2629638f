// Command lmstream-serve serves one model over OpenAI's HTTP API (package
// core/serve): POST /v1/chat/completions and /v1/completions, streaming as
// server-sent events, GET /v1/models, /health and /metrics.
//
//	lmstream-serve --model smollm2-135m [--port 8080] [--host 127.0.0.1]
//	               [--draft-model PATH] [--threads N] [--ctx N] [--slots N]
//	               [--config serve.json] [--runtime-config runtime.json]
//
// --config names a JSON file with the same settings as the flags (keys
// "model", "draft_model", "threads", "ctx", "slots", "host", "port",
// "max_streams", "max_body_bytes", "api_key", "grace", "model_id");
// flags given on the command line win over it. --runtime-config names a
// runtime config (the C ABI's lms_runtime_create JSON: any backend, any
// backend field), which the model flags then complete.
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
	_ "github.com/lmstream/lmstream/core/replay"
	"github.com/lmstream/lmstream/core/runtime"
	"github.com/lmstream/lmstream/core/serve"
)

// settings are the flags and the config file's keys.
type settings struct {
	Model        string   `json:"model"`
	DraftModel   string   `json:"draft_model"`
	Threads      int      `json:"threads"`
	Ctx          int      `json:"ctx"`
	Slots        int      `json:"slots"`
	Host         string   `json:"host"`
	Port         int      `json:"port"`
	MaxStreams   int      `json:"max_streams"`
	MaxBodyBytes int64    `json:"max_body_bytes"`
	APIKey       string   `json:"api_key"`
	Grace        duration `json:"grace"`
	ModelID      string   `json:"model_id"`
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
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "lmstream-serve:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("lmstream-serve", flag.ContinueOnError)
	var set settings
	var grace time.Duration
	configPath := fs.String("config", "", "JSON file with these settings (flags win)")
	runtimeConfig := fs.String("runtime-config", "", "runtime config JSON file (any backend and field); the flags complete it")
	fs.StringVar(&set.Model, "model", "", "GGUF file, or a model's name (smollm2-135m)")
	fs.StringVar(&set.DraftModel, "draft-model", "", "draft model for speculative decoding (same vocabulary)")
	fs.IntVar(&set.Threads, "threads", 0, "engine threads (0: all cores)")
	fs.IntVar(&set.Ctx, "ctx", 0, "context per sequence in tokens (0: the model's, at most 2048)")
	fs.IntVar(&set.Slots, "slots", 0, "sequences decoded at once (0: the runtime's default, 8)")
	fs.StringVar(&set.Host, "host", "127.0.0.1", "address to listen on")
	fs.IntVar(&set.Port, "port", 8080, "port to listen on (0: any free port, printed at start)")
	fs.IntVar(&set.MaxStreams, "max-streams", 256, "completion requests served at once; more get 429")
	fs.Int64Var(&set.MaxBodyBytes, "max-body-bytes", 1<<20, "largest request body")
	fs.DurationVar(&grace, "grace", 10*time.Second, "on SIGTERM, how long running answers may finish")
	fs.StringVar(&set.ModelID, "model-id", "", "model name /v1/models lists (default: the model file's base name)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil // the usage was printed as asked
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (settings are flags: --model ...)", fs.Arg(0))
	}
	set.Grace = duration(grace)
	if *configPath != "" {
		if err := applyConfigFile(*configPath, fs, &set); err != nil {
			return err
		}
	}
	if k := os.Getenv("LMSTREAM_API_KEY"); k != "" {
		set.APIKey = k
	}
	cfg, err := runtimeJSON(*runtimeConfig, &set)
	if err != nil {
		return err
	}
	if set.ModelID == "" {
		set.ModelID = "lmstream"
		if set.Model != "" {
			set.ModelID = trimExt(filepath.Base(set.Model))
		}
	}

	ln, err := net.Listen("tcp", net.JoinHostPort(set.Host, strconv.Itoa(set.Port)))
	if err != nil {
		return err
	}
	start := time.Now()
	rt, err := runtime.New(cfg)
	if err != nil {
		ln.Close()
		return fmt.Errorf("creating the runtime: %w", err)
	}
	defer rt.Close()
	srv := serve.New(rt, serve.Options{
		ModelID: set.ModelID, MaxBodyBytes: set.MaxBodyBytes, MaxStreams: set.MaxStreams, APIKey: set.APIKey,
	})
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	// Signals are caught from before the address line on: whoever saw it
	// may send SIGTERM at once and must get the graceful shutdown.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	// The address line is what scripts and tests wait for (with --port 0
	// it is the only way to learn the port).
	fmt.Printf("lmstream-serve: model %s loaded in %.1fs; listening on http://%s\n", set.ModelID, time.Since(start).Seconds(), ln.Addr())

	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case sig := <-sigs:
		log.Printf("lmstream-serve: %v: no longer accepting; answers in progress have %v to finish", sig, time.Duration(set.Grace))
	}
	// hs.Shutdown closes the listener at once and waits for the handlers;
	// srv.Shutdown ends the answers still running when the grace is over,
	// so hs.Shutdown's own deadline only backs that up.
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(set.Grace))
	defer cancel()
	go srv.Shutdown(ctx)
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
	set.APIKey = file.APIKey
	return nil
}

// runtimeJSON builds the runtime config: the --runtime-config file, if
// any, with the model settings added (the cpu backend's field names).
func runtimeJSON(path string, set *settings) ([]byte, error) {
	cfg := map[string]any{}
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(data, &cfg); err != nil {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
	}
	if set.Model == "" && path == "" {
		return nil, fmt.Errorf("--model is required (a GGUF file or a model's name such as smollm2-135m)")
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
	return json.Marshal(cfg)
}

func trimExt(name string) string {
	if ext := filepath.Ext(name); ext == ".gguf" {
		return name[:len(name)-len(ext)]
	}
	return name
}
