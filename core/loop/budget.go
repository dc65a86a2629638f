package loop

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/lmstream/lmstream/core/internal/sat"

	"github.com/lmstream/lmstream/core/status"
)

// BudgetShare is the share of the machine's memory (physical memory, or the
// cgroup's limit when one is set and lower) that a runtime may reserve when
// its config sets no "memory_budget_bytes".
const BudgetShare = 0.75

// Budget is the memory a runtime may reserve at creation.
type Budget struct {
	Bytes  int64  // math.MaxInt64: no limit known
	Source string // where the number comes from, for messages
}

// MemoryBudget is the budget of a runtime config: its "memory_budget_bytes",
// or DefaultBudget.
func (c *Config) MemoryBudget() Budget {
	if c.MemoryBudgetBytes > 0 {
		return Budget{c.MemoryBudgetBytes, `config field "memory_budget_bytes"`}
	}
	return DefaultBudget()
}

// DefaultBudget is BudgetShare of the memory this process can have: the
// smaller of MemTotal (/proc/meminfo) and a cgroup memory limit (v2
// memory.max, or v1 memory.limit_in_bytes). Where neither can be read there
// is no limit.
func DefaultBudget() Budget {
	total, src := int64(math.MaxInt64), ""
	if mt, ok := memTotal("/proc/meminfo"); ok {
		total, src = mt, fmt.Sprintf("physical memory %s", FormatBytes(mt))
	}
	for _, p := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		if lim, ok := cgroupLimit(p); ok && lim < total {
			total, src = lim, fmt.Sprintf("cgroup memory limit %s (%s)", FormatBytes(lim), p)
		}
	}
	if total == math.MaxInt64 {
		return Budget{math.MaxInt64, "no memory limit known"}
	}
	return Budget{int64(float64(total) * BudgetShare), fmt.Sprintf("%.0f%% of %s", BudgetShare*100, src)}
}

// memTotal reads MemTotal (kB) from a meminfo file.
func memTotal(path string) (int64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		if err != nil || kb <= 0 || kb > math.MaxInt64/1024 {
			return 0, false
		}
		return kb * 1024, true
	}
	return 0, false
}

// cgroupLimit reads a cgroup memory limit: "max" (v2) or a v1 value near
// 2^63 (page-rounded) mean none.
func cgroupLimit(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	s := string(bytes.TrimSpace(b))
	if s == "max" {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v <= 0 || v >= math.MaxInt64/2 {
		return 0, false
	}
	return v, true
}

// Reservation adds up what a runtime is about to reserve, item by item, so
// that a refusal can say where the memory goes.
type Reservation struct {
	items []reserved
	total int64
}

type reserved struct {
	what  string
	bytes int64
}

// Add records bytes for what (a description with the numbers behind it).
// Sums saturate at math.MaxInt64: a product that overflowed is reported as
// MaxInt64 by its caller and still refused.
func (r *Reservation) Add(what string, bytes int64) {
	if bytes <= 0 {
		return
	}
	r.items = append(r.items, reserved{what, bytes})
	r.total = sat.Add(r.total, bytes)
}

// Total is the sum of the items.
func (r *Reservation) Total() int64 { return r.total }

func (r *Reservation) String() string {
	var sb strings.Builder
	for i, it := range r.items {
		if i > 0 {
			sb.WriteString(", ")
		}
		fmt.Fprintf(&sb, "%s %s", it.what, FormatBytes(it.bytes))
	}
	return sb.String()
}

// Check refuses a reservation over the budget with a Capacity error that
// gives the numbers: needed against budget, and the breakdown.
func (r *Reservation) Check(b Budget) error {
	if r.total <= b.Bytes {
		return nil
	}
	return status.Errorf(status.Capacity,
		`config: the runtime would reserve %s of memory but its budget is %s (%s; set "memory_budget_bytes" to change it): %s`,
		FormatBytes(r.total), FormatBytes(b.Bytes), b.Source, r)
}

// FormatBytes writes a byte count for people: "193.3 GB (193274265600 B)"
// above a kilobyte, so that both the magnitude and the exact figure show.
func FormatBytes(n int64) string {
	switch {
	case n == math.MaxInt64:
		return "more than 9.2 EB (overflows int64)"
	case n >= 1e9:
		return fmt.Sprintf("%.1f GB (%d B)", float64(n)/1e9, n)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB (%d B)", float64(n)/1e6, n)
	case n >= 1e3:
		return fmt.Sprintf("%.1f kB (%d B)", float64(n)/1e3, n)
	}
	return fmt.Sprintf("%d B", n)
}
