//go:build !amd64 || noasm

package sample

// maxLogit returns the largest logit, ignoring NaN (−Inf if there is
// none).
func maxLogit(l []float32) float32 { return maxLogitGo(l) }

// firstEqual returns the index of the first logit equal to v, or −1.
func firstEqual(l []float32, v float32) int { return firstEqualGo(l, v) }
