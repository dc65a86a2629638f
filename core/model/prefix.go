package model

import "fmt"

// ForwardPrefix is Forward through the first layers of the model only,
// followed by the final norm and the output head: the early-exit self-draft
// of speculative decoding (the target's own first layers guess the next
// token). Caches only need those layers (NewPrefixCache, or NewCache).
// layers must be in [1, Config().Layers]; with all of them it is Forward.
func (m *Model) ForwardPrefix(b *Batch, logits []float32, layers int) error {
	if layers < 1 || layers > len(m.layers) {
		return fmt.Errorf("model: ForwardPrefix over %d layers of %d", layers, len(m.layers))
	}
	if layers == len(m.layers) {
		return m.Forward(b, logits)
	}
	// Forward walks m.layers: hand it the prefix for this one call. Forward
	// is not safe for concurrent use anyway, so nothing can observe the
	// shortened slice.
	all := m.layers
	m.layers = all[:layers]
	defer func() { m.layers = all }()
	return m.Forward(b, logits)
}
