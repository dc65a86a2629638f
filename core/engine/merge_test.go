package engine

import (
	"encoding/json"
	"fmt"
)

// MergeConfig returns the JSON object base with the members of extra (a
// string of `,"key":value` pairs, the form the test helpers take) added,
// an extra member replacing base's member of the same key. The runtime
// rejects duplicate keys, so an override must replace, not repeat. It is
// exported for the external test package.
func MergeConfig(base, extra string) string {
	var m, add map[string]json.RawMessage
	if err := json.Unmarshal([]byte(base), &m); err != nil {
		panic(fmt.Sprintf("MergeConfig base %s: %v", base, err))
	}
	if extra != "" {
		if err := json.Unmarshal([]byte("{"+extra[1:]+"}"), &add); err != nil {
			panic(fmt.Sprintf("MergeConfig extra %s: %v", extra, err))
		}
	}
	for k, v := range add {
		m[k] = v
	}
	out, _ := json.Marshal(m)
	return string(out)
}
