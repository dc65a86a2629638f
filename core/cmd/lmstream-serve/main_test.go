package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lmstream/lmstream/core/loop"
)

const replayConfig = `{"backend": "replay", "max_slots": 2, "eos_id": 0, "special_ids": [0], "vocab": ["3c2f733e", "48656c", "6c6f"]}`

// server is run() on a free loopback port, its output read line by line.
type server struct {
	url   string
	lines *bufio.Reader
	stop  context.CancelFunc
	done  chan error
}

func start(t *testing.T, args ...string) *server {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	r, w := io.Pipe()
	s := &server{lines: bufio.NewReader(r), stop: stop, done: make(chan error, 1)}
	go func() {
		err := run(ctx, append([]string{"--port", "0", "--grace", "100ms"}, args...), w)
		w.Close()
		s.done <- err
	}()
	t.Cleanup(func() {
		stop()
		go io.Copy(io.Discard, r)
		<-s.done
	})
	line := s.line(t)
	m := regexp.MustCompile(`listening on (http://\S+);`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("first line %q", line)
	}
	s.url = m[1]
	return s
}

func (s *server) line(t *testing.T) string {
	t.Helper()
	line, err := s.lines.ReadString('\n')
	if err != nil {
		t.Fatalf("reading the server's output: %v (after %q)", err, line)
	}
	return line
}

func get(t *testing.T, url string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}

// The server listens before the model is loaded and answers 503
// ("loading") meanwhile; once loaded it says so and serves. The load is
// held back by the test until it has seen the 503.
func TestListensWhileLoading(t *testing.T) {
	release := make(chan struct{})
	real := newRuntime
	newRuntime = func(cfg []byte, progress func(string, float64)) (*loop.Runtime, error) {
		progress("test", 0.5)
		<-release
		return real(cfg, progress)
	}
	defer func() { newRuntime = real }()
	cfg := filepath.Join(t.TempDir(), "replay.json")
	os.WriteFile(cfg, []byte(replayConfig), 0o600)
	s := start(t, "--runtime-config", cfg)

	// The address line comes before the loading goroutine has reported
	// its progress: wait for the report (the load is held, so the server
	// stays loading meanwhile).
	code, body := get(t, s.url+"/health")
	for deadline := time.Now().Add(10 * time.Second); body["progress"] != 0.5 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		code, body = get(t, s.url+"/health")
	}
	if code != 503 || body["status"] != "loading" || body["progress"] != 0.5 {
		close(release) // let the load finish before newRuntime is restored
		t.Fatalf("health while loading: %d %v", code, body)
	}
	if code, body := get(t, s.url+"/v1/models"); code != 503 || body["error"].(map[string]any)["code"] != "loading" {
		t.Fatalf("models while loading: %d %v", code, body)
	}
	close(release)
	if line := s.line(t); !strings.Contains(line, "loaded in") || !strings.Contains(line, "ready") {
		t.Fatalf("second line %q", line)
	}
	if code, body := get(t, s.url+"/health"); code != 200 {
		t.Fatalf("health once ready: %d %v", code, body)
	}
	s.stop()
	if err := <-s.done; err != nil {
		t.Fatalf("stopped: %v", err)
	}
	s.done <- nil // for the cleanup
}

// A model path naming a FIFO (or a directory, or a device) is refused by
// name; opening it used to block lms_runtime_create forever.
func TestModelThatIsNotAFileIsRefused(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "model.gguf")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	for _, args := range [][]string{
		{"--model", fifo},
		{"--model", dir},
	} {
		s := start(t, args...)
		err := <-s.done
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("%v: %v", args, err)
		}
		s.done <- nil
	}
}

// With --draft-model the draft model drafts for requests that name no
// drafter, sampling ones included (they speculated only when they asked).
func TestDraftModelDraftsByDefault(t *testing.T) {
	model, err := filepath.Abs("../../../models/SmolLM2-135M-Instruct.Q4_1.gguf")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(model); err != nil {
		t.Skipf("model %s absent (make model)", model)
	}
	// A fixed verify budget skips the start-up measurement, and
	// speculation is kept on where it would not pay, so that whether a
	// request drafted shows in the counters.
	cfg := filepath.Join(t.TempDir(), "runtime.json")
	os.WriteFile(cfg, []byte(`{"spec_budget": 8, "spec_adaptive": false}`), 0o600)
	s := start(t, "--runtime-config", cfg, "--model", model, "--draft-model", model, "--ctx", "256", "--slots", "1", "--threads", "1")
	line := s.line(t)
	if !strings.Contains(line, "ready") {
		t.Fatalf("second line %q", line)
	}
	t.Log(line) // the load's time, for whoever wonders why the test takes it
	resp, err := http.Post(s.url+"/v1/chat/completions", "application/json", strings.NewReader(
		`{"messages": [{"role": "user", "content": "Count from 1 to 10."}], "temperature": 0.7, "seed": 1, "max_tokens": 8}`))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	resp, err = http.Get(s.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`(?m)^lmstream_draft_tokens_proposed_total (\S+)$`).FindSubmatch(metrics)
	var proposed float64
	if m != nil {
		fmt.Sscan(string(m[1]), &proposed)
	}
	if proposed == 0 {
		t.Fatalf("a sampling request drafted nothing:\n%s", metrics)
	}
}

// Settings from the config file, flags winning, timeouts included.
func TestConfigFileTimeouts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "serve.json")
	os.WriteFile(path, []byte(`{"model": "m.gguf", "write_timeout": "5s", "idle_timeout": "2m", "max_conns": 64}`), 0o600)
	set, _, err := parseSettings([]string{"--config", path, "--idle-timeout", "3s"})
	if err != nil {
		t.Fatal(err)
	}
	if time.Duration(set.WriteTimeout) != 5*time.Second || time.Duration(set.IdleTimeout) != 3*time.Second ||
		set.MaxConns != 64 || time.Duration(set.ReadTimeout) != 30*time.Second {
		t.Fatalf("settings %+v", set)
	}
}

// TestKVTypeReachesTheRuntime: --kv-type (or the config file's "kv_type")
// becomes the runtime config's "kv_type"; the flag wins over the file.
func TestKVTypeReachesTheRuntime(t *testing.T) {
	path := filepath.Join(t.TempDir(), "serve.json")
	os.WriteFile(path, []byte(`{"model": "m.gguf", "kv_type": "f16"}`), 0o600)
	for args, want := range map[string]string{"": "f16", "--kv-type=q8_0": "q8_0"} {
		argv := []string{"--config", path}
		if args != "" {
			argv = append(argv, args)
		}
		set, _, err := parseSettings(argv)
		if err != nil {
			t.Fatal(err)
		}
		data, _, err := runtimeJSON("", set)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), `"kv_type":"`+want+`"`) {
			t.Fatalf("%v: runtime config %s", argv, data)
		}
	}
}
