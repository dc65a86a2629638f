package main

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"testing"

	"github.com/lmstream/lmstream/spec/serving"
	"github.com/stretchr/testify/require"
)

// The harness's smoke run (CI): a two-load sweep of every policy on the
// GPU-like curve and the H200's, the §6.3 strategies and the §6.4 study,
// each with its CSV and plots, every policy present at every load.
func TestQuickRun(t *testing.T) {
	out := t.TempDir()
	require.NoError(t, run(simOpts{out: out, threads: 1, quick: true, seed: 1}))
	for _, f := range []string{"gpu-like-rates", "gpu-h200-rates", "gpu-like-strategies"} {
		for _, ext := range []string{".csv", "-attainment.svg", "-goodput.svg"} {
			st, err := os.Stat(filepath.Join(out, f+ext))
			require.NoError(t, err)
			require.Positive(t, st.Size())
		}
	}
	for _, name := range []string{"gpu-like-rates.csv", "gpu-h200-rates.csv"} {
		f, err := os.Open(filepath.Join(out, name))
		require.NoError(t, err)
		recs, err := csv.NewReader(f).ReadAll()
		f.Close()
		require.NoError(t, err)
		require.Len(t, recs, 1+2*len(serving.Systems), "%s: header, then every policy at 2 loads", name)
	}
	_, err := os.Stat(filepath.Join(out, "gpu-like-urgent-attainment.svg"))
	require.NoError(t, err)
}
