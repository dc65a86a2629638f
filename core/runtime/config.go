package runtime

import (
	"sort"
	"sync"

	"github.com/lmstream/lmstream/core/status"
)

// Config is what every runtime takes, whatever its backend.
type Config struct {
	Backend  string // registered backend name; "cpu" by default
	MaxSlots int    // requests decoded at once
	MaxQueue int    // batch items waiting for a slot before submit says Capacity
	// Backend-specific fields, taken by the backend's Factory.
	Extra *Fields
}

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
	f, err := ParseFields(data, "config")
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
	if c.MaxSlots < 1 || c.MaxSlots > 4096 {
		return nil, status.Errorf(status.InvalidRequest, `config field "max_slots" must be in [1, 4096], got %d`, c.MaxSlots)
	}
	if _, err := f.Take("max_queue", &c.MaxQueue); err != nil {
		return nil, err
	}
	if c.MaxQueue < 1 {
		return nil, status.Errorf(status.InvalidRequest, `config field "max_queue" must be at least 1, got %d`, c.MaxQueue)
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
