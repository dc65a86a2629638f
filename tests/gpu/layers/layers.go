// Package layers rewrites a Llama-family GGUF model with another number of
// layers: fewer (the first ones, to carry a real model to a GPU machine) or
// more (the real layers repeated in turn, to time a full-depth model there
// from a shallow copy). block_count says the new depth; the result is a
// valid model in its own right.
package layers

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/lmstream/lmstream/core/gguf"
)

// Rewrite writes f's model with n layers to path: layer i is f's layer
// i mod (f's layer count).
func Rewrite(f *gguf.File, n int, path string) error {
	have := 0
	for _, t := range f.Tensors {
		if i, ok := layerOf(t.Name); ok {
			have = max(have, i+1)
		}
	}
	if n < 1 || have == 0 {
		return fmt.Errorf("layers: %d layers wanted, the model has %d", n, have)
	}
	w := gguf.NewWriter()
	for _, kv := range f.KV {
		v := kv.Value
		if strings.HasSuffix(kv.Key, ".block_count") {
			var err error
			if v, err = gguf.ValueOf(uint32(n)); err != nil {
				return err
			}
		}
		if err := w.AddKV(kv.Key, v); err != nil {
			return err
		}
	}
	for _, t := range f.Tensors {
		if _, ok := layerOf(t.Name); !ok {
			if err := w.AddTensor(t.Name, t.Type, t.Dims, t.Data); err != nil {
				return err
			}
		}
	}
	for i := 0; i < n; i++ {
		src := fmt.Sprintf("blk.%d.", i%have)
		for _, t := range f.Tensors {
			if rest, ok := strings.CutPrefix(t.Name, src); ok {
				if err := w.AddTensor(fmt.Sprintf("blk.%d.%s", i, rest), t.Type, t.Dims, t.Data); err != nil {
					return err
				}
			}
		}
	}
	return w.WriteFile(path)
}

func layerOf(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return 0, false
	}
	dot := strings.IndexByte(rest, '.')
	if dot < 0 {
		return 0, false
	}
	i, err := strconv.Atoi(rest[:dot])
	return i, err == nil
}
