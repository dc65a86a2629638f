package loop

import (
	"sort"
	"sync"

	"github.com/lmstream/lmstream/core/jsonstrict"
	"github.com/lmstream/lmstream/core/status"
)

// Config is what every runtime takes, whatever its backend.
type Config struct {
	Backend  string // registered backend name; "cpu" by default
	MaxSlots int    // requests decoded at once
	MaxQueue int    // batch items waiting for a slot before submit says Capacity
	// MemoryBudgetBytes caps what the backend reserves at creation (weights,
	// KV caches, scratch); 0 means DefaultBudget. See MemoryBudget.
	MemoryBudgetBytes int64
	// Backend-specific fields, taken by the backend's Factory.
	Extra *jsonstrict.Fields
	// Progress, when set, hears how loading advances (see Report). It is
	// not a JSON field: the caller of NewWithProgress supplies it.
	Progress func(stage string, fraction float64)
}

// Load stages a backend reports through Config.Report, in this order (a
// backend skips those it has no work for). NewWithProgress reports StageReady.
const (
	StageOpen      = "open"        // reading the model file's header and planning memory
	StageWeights   = "weights"     // reading and packing the weights
	StageSpec      = "speculation" // drafters, a draft model when configured
	StageCalibrate = "calibration" // timing the forward pass to size speculation
	StageReady     = "ready"       // the runtime is created
)

// Report tells the config's Progress, if any, that loading reached stage,
// with fraction (0 to 1) of the whole creation done. A backend reports only
// at points where loading really moves on, so a caller can show it as is.
func (c *Config) Report(stage string, fraction float64) {
	if c != nil && c.Progress != nil {
		c.Progress(stage, fraction)
	}
}

// Hard limits of the common config fields. Within them, what a config may
// reserve is bounded by its memory budget (each backend checks it).
const (
	MaxSlotsLimit = 4096
	// MaxQueueLimit bounds the queue: every queued item holds its prompt's
	// tokens, so an unbounded queue is unbounded memory.
	MaxQueueLimit = 1 << 20
)

// Factory builds a backend from the backend-specific config fields. It must
// take every field it understands; leftovers are reported as unknown.
type Factory func(cfg *Config) (Backend, error)

var (
	registryMu sync.Mutex
	registry   = map[string]Factory{}
)

// Register makes a backend available under name, as database/sql drivers do.
// Backends call it from an init function.
func Register(name string, f Factory) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[name]; dup {
		panic("runtime: backend registered twice: " + name)
	}
	registry[name] = f
}

func backendNames() []string {
	var names []string
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ParseConfig reads a runtime config's common fields.
func ParseConfig(data []byte) (*Config, error) {
	f, err := jsonstrict.ParseFields(data, "config")
	if err != nil {
		return nil, err
	}
	c := &Config{Backend: "cpu", MaxSlots: 8, MaxQueue: 4096}
	if _, err := f.Take("backend", &c.Backend); err != nil {
		return nil, err
	}
	if _, err := f.Take("max_slots", &c.MaxSlots); err != nil {
		return nil, err
	}
	if c.MaxSlots < 1 || c.MaxSlots > MaxSlotsLimit {
		return nil, status.Errorf(status.InvalidRequest, `config field "max_slots" must be in [1, %d], got %d`, MaxSlotsLimit, c.MaxSlots)
	}
	if _, err := f.Take("max_queue", &c.MaxQueue); err != nil {
		return nil, err
	}
	if c.MaxQueue < 1 || c.MaxQueue > MaxQueueLimit {
		return nil, status.Errorf(status.InvalidRequest, `config field "max_queue" must be in [1, %d], got %d`, MaxQueueLimit, c.MaxQueue)
	}
	if _, err := f.Take("memory_budget_bytes", &c.MemoryBudgetBytes); err != nil {
		return nil, err
	}
	if c.MemoryBudgetBytes < 0 {
		return nil, status.Errorf(status.InvalidRequest, `config field "memory_budget_bytes" must be at least 0 (0: %.0f%% of the machine's memory), got %d`, BudgetShare*100, c.MemoryBudgetBytes)
	}
	c.Extra = f
	return c, nil
}

func newBackend(c *Config) (Backend, error) {
	registryMu.Lock()
	f, ok := registry[c.Backend]
	names := backendNames()
	registryMu.Unlock()
	if !ok {
		return nil, status.Errorf(status.InvalidRequest, "config: unknown backend %q (available: %v)", c.Backend, names)
	}
	b, err := f(c)
	if err != nil {
		return nil, err
	}
	if err := c.Extra.Rest(); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}
